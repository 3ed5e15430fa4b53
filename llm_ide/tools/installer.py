"""Installs tools into an environment (SPEC §9), from the per-user cache when it has them, and renders their Tool
Usage text. Each tool's progress and outcome is told through `on_event`."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jinja2

from llm_ide.environments.base import Environment, EnvironmentFailure
from llm_ide.settings import PROMPTS_DIR, read_yaml
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.checked import CheckMarker
from llm_ide.tools.config import TOOLS_DIR, ToolConfig, ToolConfigError, load_tool_config, tool_config_path
from llm_ide.tools.plan import (
    CHECK_STEPS,
    ScriptError,
    Step,
    Target,
    build_steps,
    plan,
    render_template,
    run_steps,
    tool_variables,
)

log = logging.getLogger("llm_ide.tools")

STEP_TIMEOUT = 900.0
OUTPUT_TAIL = 6000
__all__ = ["FailedTool", "InstallReport", "InstalledTool", "ToolEvent", "install_tools", "plan", "tool_usage_text"]


@dataclass(frozen=True)
class InstalledTool:
    name: str
    version: str | None
    invocation: str  # how the agent calls it: `<executable>`, the venv's bin path, or `conda run -n <name> ...`
    usage: str  # the rendered `usage`
    commands: tuple[str, ...]  # the command words the agent types to call it (to spot its output in observations)
    config: ToolConfig = field(repr=False)
    how: str = "built"  # "from cache" (nothing was built) | "built and cached" | "built"

    @property
    def cached(self) -> bool:
        return self.how == "from cache"


@dataclass(frozen=True)
class FailedTool:
    name: str
    step: str
    command: str
    output: str
    returncode: int | None = None

    @property
    def reason(self) -> str:
        status = f" (exit status {self.returncode})" if self.returncode is not None else ""
        return f"step `{self.step}` failed{status}: {self.command}\n{self.output.strip()}".strip()

    @property
    def summary(self) -> str:
        """One line: the failing step and the last line of its output."""
        status = f", exit status {self.returncode}" if self.returncode is not None else ""
        last = next((line.strip() for line in reversed(self.output.splitlines()) if line.strip()), "")
        return f"step `{self.step}` failed{status}" + (f": {last}" if last else "")


@dataclass(frozen=True)
class ToolEvent:
    """installing → step* → installed | failed. `step` events come only while a tool is built (not from cache)."""

    tool: str
    kind: Literal["installing", "step", "installed", "failed"]
    detail: str = ""  # step: its name; installed: "from cache" | "built and cached" | "built"; failed: the summary
    seconds: float = 0.0  # installed, failed: since `installing`


@dataclass
class InstallReport:
    installed: list[InstalledTool] = field(default_factory=list)
    failed: list[FailedTool] = field(default_factory=list)


class StepFailed(Exception):
    def __init__(self, failure: FailedTool) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "[...]\n" + text[-OUTPUT_TAIL:]


def run_step(env: Environment, tool: ToolConfig, step: Step, timeout: float) -> None:
    log.info("tool %s: %s: %s", tool.tool_name, step.name, step.command)
    if step.copy is not None:
        source, destination = step.copy
        try:
            env.copy_in(source, destination)
        except EnvironmentFailure:
            raise
        except Exception as error:  # noqa: BLE001 (any copy failure fails this tool only; the run goes on)
            failure = FailedTool(tool.tool_name, step.name, step.command, f"{type(error).__name__}: {error}")
            raise StepFailed(failure) from error
        return
    result = env.execute(step.command, timeout=timeout)
    if result.returncode != 0 or result.timed_out:
        raise StepFailed(FailedTool(tool.tool_name, step.name, step.command, tail(result.output), result.returncode))


def run_every_time(env: Environment, tool: ToolConfig, steps: list[Step], entry: Path | None, timeout: float) -> None:
    """The steps after the build; the checks among them (CHECK_STEPS) not again where they passed before with a local
    cache `entry` as it is now, in this kind of environment (tools/checked.py)."""
    checks = [step for step in steps if step.name in CHECK_STEPS]
    marker = CheckMarker.of(entry, env, checks) if entry is not None and checks else None
    held = marker is not None and marker.holds()
    if held:
        log.info("tool %s: checked before with %s as it is", tool.tool_name, entry)
    for step in steps:
        if not (held and step.name in CHECK_STEPS):
            run_step(env, tool, step, timeout)
    if marker is not None and not held:
        marker.remember()


def command_words(usage: str, invocation_text: str) -> tuple[str, ...]:
    """The words that call the tool: its invocation's first word and any `<that word>-suffix` the usage mentions
    (e.g. `debugger` and `debugger-commands`)."""
    first = invocation_text.split()[0]
    mentioned = re.findall(r"(?<![\w/.-])" + re.escape(first) + r"[\w.-]*", usage)
    return tuple(dict.fromkeys([first, *mentioned]))


def has_conda(env: Environment) -> bool:
    return env.execute("command -v conda", timeout=60).returncode == 0


def install_tool(
    env: Environment,
    tool: ToolConfig,
    variables: dict[str, Any],
    target: Target,
    timeout: float = STEP_TIMEOUT,
    cache: ToolCache | None = None,
    emit: Callable[[ToolEvent], None] = lambda event: None,
) -> InstalledTool:
    """Builds the tool (or takes it from `cache`), then runs the per-run steps; raises StepFailed with the failing
    step's command and output."""

    def build(where: Target) -> None:
        for step in build_steps(tool, where):
            emit(ToolEvent(tool.tool_name, "step", step.name))
            run_step(env, tool, step, timeout)

    try:
        run_steps(tool, target, variables)  # a script that needs a missing variable fails before any build
    except ScriptError as error:
        raise StepFailed(FailedTool(tool.tool_name, error.step, f"({error.key} template)", str(error))) from None
    how, entry = "built", None
    if cache is None:
        build(target)
    else:
        lookup = cache.install(env, tool, target, build, timeout)
        target, entry = lookup.target, lookup.entry
        how = "from cache" if lookup.hit else "built and cached" if lookup.key else "built"
    run_every_time(env, tool, run_steps(tool, target, variables), entry, timeout)
    values = tool_variables(tool, target, variables)
    try:
        usage = render_template(tool.usage, values)
    except jinja2.TemplateError as error:
        raise StepFailed(FailedTool(tool.tool_name, "usage", "(usage template)", str(error))) from None
    return InstalledTool(
        name=tool.tool_name,
        version=tool.version,
        invocation=values["invocation"],
        usage=usage,
        commands=command_words(usage, values["invocation"]),
        config=tool,
        how=how,
    )


def install_tools(
    env: Environment,
    tools: Sequence[str | ToolConfig],
    variables: dict[str, Any] | None = None,
    tools_dir: Path = TOOLS_DIR,
    timeout: float = STEP_TIMEOUT,
    on_event: Callable[[ToolEvent], None] | None = None,
    cache: ToolCache | None = None,
) -> InstallReport:
    """Installs each tool (by name, yaml path or config); a tool that fails is reported and left out. With `cache`,
    a tool built before for the same source and interpreter is put in place from there."""
    emit = on_event or (lambda event: None)
    report = InstallReport()
    configs: list[ToolConfig] = []
    for entry in tools:
        if isinstance(entry, ToolConfig):
            configs.append(entry)
            continue
        try:
            configs.append(load_tool_config(tool_config_path(entry, tools_dir)))
        except ToolConfigError as error:
            failure = FailedTool(str(entry), "config", "(load the tool yaml)", str(error))
            report.failed.append(failure)
            log.warning("tool %s is left out: %s", failure.name, failure.reason)
            emit(ToolEvent(failure.name, "failed", failure.summary))
    conda = any(tool.py_standalone for tool in configs) and has_conda(env)
    target = Target(env.tools_root, conda=conda, local=not env.capabilities.system_path)
    for tool in configs:
        start = time.monotonic()
        emit(ToolEvent(tool.tool_name, "installing"))
        try:
            installed = install_tool(env, tool, dict(variables or {}), target, timeout, cache, emit)
        except StepFailed as failed:
            report.failed.append(failed.failure)
            log.warning("tool %s is left out: %s", failed.failure.name, failed.failure.reason)
            emit(ToolEvent(tool.tool_name, "failed", failed.failure.summary, time.monotonic() - start))
            continue
        report.installed.append(installed)
        log.info("tool %s installed (%s) in %.1f s", tool.tool_name, installed.how, time.monotonic() - start)
        emit(ToolEvent(tool.tool_name, "installed", installed.how, time.monotonic() - start))
    return report


def tool_usage_text(installed: Sequence[InstalledTool]) -> str:
    """The prompt's Tool Usage section, from llm_ide/prompts/tools.yaml."""
    templates = read_yaml(PROMPTS_DIR / "tools.yaml")
    return render_template(templates["tool_usage"], {"tools": list(installed)})
