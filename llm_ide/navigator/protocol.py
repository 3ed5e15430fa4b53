"""The navigator's contract: what the driver (or any MCP client) asks, and what comes back. Implementations: a model
navigator, a human one (LangGraph `interrupt()` in the graph), and a remote one over MCP."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import AliasChoices, BaseModel, Field, computed_field

from llm_ide.errors import LlmIdeError, UsageError

DecidedBy = Literal["model", "human", "timeout", "mcp"]
# the bearer token of a served navigator (`llm-ide navigator serve` prints or reads it; MCP clients send it)
TOKEN_VARIABLE = "LLM_IDE_NAVIGATOR_TOKEN"


class NavigatorUsage(BaseModel):
    """A navigator's model usage, named as the driver's is: `api_calls` (a record or server of before: `calls`),
    `cache_read_tokens` (of before: `cached_tokens`); the names of before are written too, for a reader of before.
    `estimated_calls`: those whose usage was estimated (a reply without usage, a call cut short)."""

    api_calls: int = Field(0, validation_alias=AliasChoices("api_calls", "calls"))
    input_tokens: int = 0
    cache_read_tokens: int = Field(0, validation_alias=AliasChoices("cache_read_tokens", "cached_tokens"))
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    estimated_calls: int = 0

    def plus(self, other: NavigatorUsage, sign: int = 1) -> NavigatorUsage:
        """This usage and `other`'s (`sign` -1: without it)."""
        return NavigatorUsage(
            **{key: getattr(self, key) + sign * getattr(other, key) for key in NavigatorUsage.model_fields}
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def calls(self) -> int:
        """`api_calls` under its name of before, written beside it: a client or reader of before reads them too."""
        return self.api_calls

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cached_tokens(self) -> int:
        """`cache_read_tokens` under its name of before, written beside it."""
        return self.cache_read_tokens


class PermissionRequest(BaseModel):
    action: str  # the action as the driver wrote it (type and parameters, rendered)
    thought: str = ""
    diff: str = ""  # preview for edit/create; empty otherwise
    context: str = ""  # the driver's code context, rendered
    reason: str = ""  # why the driver wants it (MCP clients), or the gate rule that matched


class Decision(BaseModel):
    approved: bool
    reason: str = ""
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class ReviewRequest(BaseModel):
    patch: str
    summary: str = ""


class Review(BaseModel):
    passed: bool
    comment: str = ""
    plan: str = ""  # the navigator's updated plan; empty: unchanged
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class Guidance(BaseModel):
    answer: str
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class Plan(BaseModel):
    text: str
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class NavigatorError(LlmIdeError):
    """The navigator cannot answer (no reply in its format, a server that is down): the run ends, told in one line."""


class NavigatorUnready(UsageError, ValueError):
    """Before a run starts, what its navigator needs is not there (its server, its prompts): one line, exit code 2 (a
    ValueError too: LangGraph's server shows its message to the client)."""


class NavigatorTimeout(NavigatorError):
    """No answer within the deadline: the permission and review nodes apply `navigator.timeout_decision`."""


class NavigatorAbandoned(NavigatorError):
    """A served request's client gave up while the navigator answered it: the answer was cut short."""


class Navigator(Protocol):
    def request_permission(self, request: PermissionRequest) -> Decision: ...

    def request_review(self, request: ReviewRequest) -> Review: ...

    def request_guidance(self, question: str) -> Guidance: ...


class Planner(Protocol):
    """A navigator that also plans (the model navigator): explores read-only and writes the driver's plan."""

    def plan(self, task: str) -> Plan: ...
