"""What the inspector draws: one run (an operation tree, its calls, code context and steps) and one batch."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from llm_ide.priced import cost_text, tokens_text
from llm_ide.terminal import plural


def denial(mark: Any) -> str:
    """Why the navigator refused an operation before it ran (its `denied` mark), as every view says it."""
    if not mark:
        return ""
    said = mark if isinstance(mark, dict) else {}
    by, reason = said.get("by"), said.get("reason")
    return f"denied by the navigator{f' ({by})' if by else ''}{f': {reason}' if reason else ''}"


class CallView(BaseModel):
    index: int
    kind: str
    attempt: int = 0
    step: int | None = None
    prompt: str = ""
    response: str = ""
    prompt_chars: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    response_tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    rejected: str = ""  # why its reply could not be used (a format error)
    discarded: str = ""  # why it is not in the run's history, though paid for (in the run's `discarded`)


class NodeView(BaseModel):
    id: int
    parent_id: int | None
    attempt: int = 0
    action_type: str = ""
    action_params: dict[str, Any] = Field(default_factory=dict)
    thought: str = ""
    observation: str = ""
    returncode: int | None = None  # None: it never ran (denied: why)
    denied: str = ""
    summary: str = ""
    lessons: str = ""
    duration: float = 0.0
    cost: float = 0.0
    marks: list[str] = Field(default_factory=list)
    calls: list[int] = Field(default_factory=list)  # positions in RunView.calls (an index is a discarded call's too)
    candidates: list[Any] = Field(default_factory=list)  # action sampling: every distinct candidate (a dict each)
    choice: dict[str, Any] = Field(default_factory=dict)  # action sampling: how the one that ran was chosen

    @property
    def label(self) -> str:
        params = self.action_params
        detail = params.get("path") or params.get("command") or params.get("symbol") or params.get("pattern") or ""
        return f"{self.action_type} {str(detail).splitlines()[0][:40] if detail else ''}".strip()


class ChunkHeat(BaseModel):
    """One code-context chunk: its decayed score after each step and whether it was shown in that step's prompt."""

    label: str
    file_path: str
    lines: list[int]
    scores: list[float]
    shown: list[bool]


class StepStat(BaseModel):
    step: int
    label: str = ""  # `step 3`; in a run of attempts `attempt 2, step 3` (steps counted in each), or `choice`
    prompt_chars: int = 0
    cached_tokens: int = 0
    uncached_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


class AttemptView(BaseModel):
    index: int
    chosen: bool = False
    score: float | None = None
    exit_status: str = ""
    reasons: str = ""  # the reviewer's (llm_ide/attempts)
    checks: dict[str, Any] = Field(default_factory=dict)  # what running its patch in a clean environment found
    rank: list[int] = Field(default_factory=list)  # from those checks (lower is better)
    trajectory: str = ""  # its own, beside the run's (with its code context), relative to the run's folder


class ScriptView(BaseModel):
    """A reproduction of the run (llm_ide/reproduction): what it showed on the original code and at submit."""

    name: str
    source: str  # given | generated
    before: str
    after: str = ""
    output: str = ""  # on the original code


class MessageView(BaseModel):
    """Coop: a message of the other agent, received before operation `step + 1`."""

    sender: str
    text: str
    step: int


class NavigatorView(BaseModel):
    """The navigator's records (issue 12), its usage apart from the driver's."""

    mode: str = ""
    plan: str = ""
    calls: int = 0
    tokens: int = 0
    estimated: int = 0  # calls whose tokens (and cost) were estimated
    cost: float = 0.0
    priced: bool = True  # whether its model had a price (else its cost is unknown, not $0)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    reviews: list[dict[str, Any]] = Field(default_factory=list)
    guidance: list[dict[str, Any]] = Field(default_factory=list)
    ended: str = ""


class ReplayView(BaseModel):
    """A replay of another agent's trajectory through this run (llm_ide/replay): its figures beside the original's,
    and what the prompts missed."""

    source: str  # the replayed trajectory
    figures: list[tuple[str, str, str, str]]  # (figure, llm-ide, original, ratio)
    misses: list[tuple[int, str, str, str]]  # (step, agent, kind, what)


class RunView(BaseModel):
    title: str
    source_format: str
    notes: list[str] = Field(default_factory=list)  # what was wrong in the file, and how it is shown all the same
    exit_status: str = ""
    error: str = ""  # why a run that did not submit ended
    model: str = ""
    task: str = ""
    patch: str = ""
    cost: float = 0.0  # its driver's (`model_stats`): its navigator's is apart, in `navigator`
    priced: bool = True  # False: the model had no price: its cost is unknown, shown as unpriced, never as $0
    api_calls: int = 0
    discarded: int = 0  # calls paid for outside its history (a step that never completed): in its cost, not its calls
    input_tokens: int = 0  # its driver's, as its cost (the discarded calls' too)
    output_tokens: int = 0
    estimated: int = 0  # calls whose tokens were estimated
    usage_calls: int | None = None  # another agent's trajectory: its calls that say their usage (None: all, or none)
    elapsed: float = 0.0
    nodes: list[NodeView] = Field(default_factory=list)
    calls: list[CallView] = Field(default_factory=list)
    heat: list[ChunkHeat] = Field(default_factory=list)
    steps: list[StepStat] = Field(default_factory=list)
    attempts: list[AttemptView] = Field(default_factory=list)
    messages: list[MessageView] = Field(default_factory=list)

    navigator: NavigatorView | None = None
    reproductions: list[ScriptView] = Field(default_factory=list)
    dropped: int = 0  # reproduction tests the agent wrote that failed their validation
    replay: ReplayView | None = None

    @property
    def tokens(self) -> str:
        """Its driver's tokens as the console says them (`4735+386 tokens (estimated)`); another agent's, where its
        trajectory says them (`… tokens (the usage of 3 of 5 calls)`: the others said none)."""
        made = self.api_calls + self.discarded
        said = tokens_text(self.input_tokens, self.output_tokens, self.estimated, made)
        partial = self.usage_calls is not None and self.usage_calls < made
        return f"{said} (the usage of {self.usage_calls} of {plural(made, 'call')})" if partial else said

    @property
    def spent(self) -> str:
        """Its cost as shown: the run's total (`$X`, `unpriced`, `$X + unpriced`), with its driver's and its
        navigator's apart when a navigator made calls (`cost` is the driver's alone)."""
        navigator = self.navigator
        if navigator is None or not navigator.calls:
            return cost_text(self.cost, self.priced)
        total = cost_text(self.cost + navigator.cost, self.priced, navigator.priced)
        parts = f"driver {cost_text(self.cost, self.priced)}, navigator {cost_text(navigator.cost, navigator.priced)}"
        return f"{total} ({parts})"


class InstanceRow(BaseModel):
    instance_id: str
    exit_status: str = ""
    steps: int = 0
    cost: float = 0.0
    priced: bool = True  # whether its driver's model had a price (else its cost is unknown, not $0)
    apart: bool | None = None  # whether what its variants paid apart (a navigator's) had one; None: no such part
    evaluation: str | None = None  # resolved | unresolved | empty_patch | error; None: not evaluated
    error: str = ""  # why the evaluation failed (status error), when the report says
    page: str | None = None

    @property
    def spent(self) -> str:
        """Its cost as shown: `$X`, `unpriced`, or `$X + unpriced` (a part priced, a part not)."""
        return cost_text(self.cost, self.priced, self.apart)

    @property
    def resolved(self) -> bool | None:
        """Resolved, not resolved (an empty patch is not), or neither: not evaluated, or the evaluation failed."""
        if self.evaluation in (None, "error"):
            return None
        return self.evaluation == "resolved"

    @property
    def verdict(self) -> str:
        return {"resolved": "resolved", "error": "error", None: "—"}.get(self.evaluation, "not resolved")


class BatchView(BaseModel):
    title: str
    rows: list[InstanceRow]
    evaluated: bool = False

    def spent(self) -> str:
        """The rows' cost as shown: `unpriced` said when a row's part had no price, a dollar figure when one had one."""
        parts = [part for row in self.rows for part in (row.priced, row.apart) if part is not None]
        return cost_text(sum(row.cost for row in self.rows), any(parts) or not parts, all(parts))

    def totals(self) -> dict[str, Any]:
        def count(verdict: str) -> int | None:
            return sum(row.verdict == verdict for row in self.rows) if self.evaluated else None

        return {
            "instances": len(self.rows),
            "steps": sum(row.steps for row in self.rows),
            "cost": sum(row.cost for row in self.rows),
            "spent": self.spent(),
            "resolved": count("resolved"),
            "unresolved": count("not resolved"),
            "errors": count("error"),
        }
