"""The navigator's settings (`navigator:` in the config): who navigates, what is gated, timeouts and turn limits, and
what the driver's prompts say of it (`templates`, defaults in prompts/navigator.yaml)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator

from llm_ide.actions import GIT_READERS, READERS
from llm_ide.settings import BundledTemplates, Seconds, Strict

PROMPTS = "navigator.yaml"


class DriverTemplates(BundledTemplates):
    """Jinja2 templates of what the driver sees of the navigator; a template left out keeps its default."""

    BUNDLED = (PROMPTS, "driver")

    plan: str  # ahead of the driver's memory
    actions: str  # the driver's navigator actions, in its action list
    denied: str  # observations
    review: str
    guidance: str
    timeout: str
    absent: str  # a navigator action in a run without a navigator


class NavigatorSettings(Strict):
    mode: Literal["off", "model", "human", "mcp"] = "off"
    model: str | None = None  # the navigator's model; None: the driver's
    base_url: str | None = None  # the navigator model's endpoint; None: the driver's
    url: str | None = None  # mode mcp: the navigator server's URL (http://127.0.0.1:PORT/mcp)
    prompts: str | None = None  # a YAML of navigator templates; None: llm_ide/prompts/navigator.yaml
    gate: list[str] = ["edit", "create", "bash"]  # bash: only commands that are not read-only
    read_only_commands: list[str] = list(READERS)
    read_only_git: list[str] = list(GIT_READERS)
    test_commands: list[str] = ["python -m pytest", "python3 -m pytest", "pytest", "python -m unittest"]
    review_runs_tests: bool = True  # the reviewer may run `test_commands`
    plan: bool = True  # explore and write a plan before the driver's first step
    explore_steps: PositiveInt = 8  # read-only actions the navigator may take per request
    permission_timeout: Seconds = 15.0  # seconds a human has to answer; a model's call has its own deadline
    review_timeout: Seconds = 300.0
    timeout_decision: Literal["deny", "allow"] = "deny"
    max_turns: NonNegativeInt = 0  # navigator turns (model calls, human answers) in the run; 0: no limit
    max_driver_turns: NonNegativeInt = 0  # driver operations between two reviews; 0: no limit
    max_review_rounds: PositiveInt = 3
    review_on_submit: bool = False  # a submit is reviewed first; it goes through only when the review passes
    context_chars: PositiveInt = 6000  # the driver's code context shown with a permission request
    diff_chars: PositiveInt = 6000  # a permission request's diff (and each text of a request: context_chars)
    patch_chars: PositiveInt = 48000  # the patch a review reads; the middle of a longer one is elided
    templates: DriverTemplates = Field(default_factory=lambda: DriverTemplates())

    @field_validator("mode", mode="before")
    @classmethod
    def unquoted_off(cls, value: Any) -> Any:
        """`mode: off` unquoted is YAML's false: it means off."""
        return "off" if value is False else value


# the Navigator variant's `settings`
SECTION: dict[str, tuple[Any, Any]] = {"navigator": (NavigatorSettings, NavigatorSettings)}
