"""The replay's report, as written to `replay.json`: per step and in total, for llm-ide and the original run."""

from __future__ import annotations

from pydantic import BaseModel, Field

from llm_ide.pricing import PROFILES, Price

AGENTS = ("llm-ide", "original")
HISTORY = "full history"  # the original's requests on the replay's own outputs (measure.full_history_calls)
MARKS = (10, 20, 30)


class Prices(BaseModel):
    """Per character: the prefix a request shares with its run's previous request (`cached`), the rest of it (`input`,
    or `cache_write` where the provider charges for writing it to its cache), the output. Both agents are billed
    with them, and llm-ide's model is given them as its price entry, which its renewal rule weighs."""

    profile: str = ""  # the price list's name (llm_ide.pricing.PROFILES), if it is one
    cached: float = 0.1
    input: float = 1.0
    output: float = 8.0
    cache_write: float | None = None

    @classmethod
    def of(cls, profile: str) -> Prices:
        price = PROFILES[profile]
        return cls(
            profile=profile,
            cached=price.read,
            input=price.input,
            output=price.output,
            cache_write=price.cache_write,
        )

    @property
    def price(self) -> Price:
        return Price(input=self.input, output=self.output, cache_read=self.cached, cache_write=self.cache_write)

    @property
    def uncached(self) -> float:
        return self.input if self.cache_write is None else self.cache_write

    def bill(self, raw: int, cached: int, output: int) -> float:
        return self.input_cost(raw, cached) + output * self.output

    def input_cost(self, raw: int, cached: int) -> float:
        """The prompt's part of the bill: what the memory can change (the replies are the original's)."""
        return (raw - cached) * self.uncached + cached * self.cached

    def described(self) -> str:
        name = f"{self.profile}: " if self.profile else ""
        return f"{name}uncached × {self.uncached:g} + shared prefix × {self.cached:g} + output × {self.output:g}"


class Fraction(BaseModel):
    total: int = 0
    present: int = 0

    def __add__(self, other: Fraction) -> Fraction:
        return Fraction(total=self.total + other.total, present=self.present + other.present)

    @property
    def value(self) -> float | None:
        return self.present / self.total if self.total else None


class AgentStep(BaseModel):
    """One agent's side of a step: its calls (llm-ide: the reflect call on the previous step and the act call; the
    original: its request, and any whose reply had no usable action) and what the prompt that issued the action
    held."""

    calls: int = 0
    raw: int = 0
    cached: int = 0
    output: int = 0
    bill: float = 0.0
    pre_image: Fraction = Field(default_factory=Fraction)
    context: Fraction = Field(default_factory=Fraction)
    edits: int = 0  # edits with pre-image lines
    edits_grounded: int = 0  # of those, edits whose pre-image lines were all present
    references: Fraction = Field(default_factory=Fraction)

    @property
    def uncached(self) -> int:
        return self.raw - self.cached

    def __add__(self, other: AgentStep) -> AgentStep:
        summed = {name: getattr(self, name) + getattr(other, name) for name in AgentStep.model_fields}
        return AgentStep(**summed)


class StepReport(BaseModel):
    step: int
    action: str  # the action, shortened
    returncode: int | None = None  # the replayed command's
    original_returncode: int | None = None
    edited: list[str] = Field(default_factory=list)  # tracked files the command changed
    references: list[str] = Field(default_factory=list)
    agents: dict[str, AgentStep]


class Miss(BaseModel):
    step: int
    agent: str
    kind: str  # pre-image | context | reference
    what: str  # `path:line: text` of a line, or the token


class ReplayReport(BaseModel):
    trajectory: str
    format: str
    instance_id: str | None
    commit: str
    single_call: bool
    action_format: str = "text"  # tools: llm-ide's requests carried the actions as tools, the replies tool calls
    mounted_at: str | None  # where the commands saw the checkout (None: at its own path)
    workdir_rewritten: bool = False  # no bubblewrap: the original's workdir in the commands replaced by the checkout's
    prices: Prices
    exit_status: str
    run_trajectory: str  # the replayed run's own trajectory (llm-ide inspect)
    steps: list[StepReport]
    misses: list[Miss]
    differing_returncodes: list[int] = Field(default_factory=list)  # steps whose command ended otherwise than before
    same_as_submission: bool | None = None  # the final tracked files' diff equals the original's submitted one
    environment_changes: list[str] = Field(default_factory=list)  # changed as the original's environment had them
    diverged: str = ""  # why the replayed actions stopped following the trajectory, if they did
    commands_python: str = ""  # `python3` on the commands' PATH, its version at its path: what they print depends on it

    def billed(self, agent: str) -> bool:
        """Whether every step has `agent`'s figures (HISTORY: not for a trajectory without its observation template)."""
        return bool(self.steps) and all(agent in step.agents for step in self.steps)

    def totals(self, agent: str, until: int | None = None) -> AgentStep:
        total = AgentStep()
        for step in self.steps:
            if until is None or step.step <= until:
                total = total + step.agents[agent]
        return total

    def input_cost(self, agent: str, until: int | None = None) -> float:
        total = self.totals(agent, until)
        return self.prices.input_cost(total.raw, total.cached)

    def bill_ratio(self, until: int | None = None, against: str = "original") -> float | None:
        if (until is not None and until > len(self.steps)) or not self.billed(against):
            return None
        ours, theirs = self.totals("llm-ide", until).bill, self.totals(against, until).bill
        return ours / theirs if theirs else None

    def input_ratio(self, until: int | None = None) -> float | None:
        """The prompts' cost alone, llm-ide / the original (the bill without the replies, which both share)."""
        if until is not None and until > len(self.steps):
            return None
        theirs = self.input_cost("original", until)
        return self.input_cost("llm-ide", until) / theirs if theirs else None
