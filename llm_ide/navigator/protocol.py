"""The navigator's contract: what the driver (or any MCP client) asks, and what comes back. Implementations: a model
navigator, a human one (LangGraph `interrupt()` in the graph), and a remote one over MCP."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field

DecidedBy = Literal["model", "human", "timeout", "mcp"]


class NavigatorUsage(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


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
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class Guidance(BaseModel):
    answer: str
    by: DecidedBy = "model"
    usage: NavigatorUsage = Field(default_factory=NavigatorUsage)


class Navigator(Protocol):
    def request_permission(self, request: PermissionRequest) -> Decision: ...

    def request_review(self, request: ReviewRequest) -> Review: ...

    def request_guidance(self, question: str) -> Guidance: ...
