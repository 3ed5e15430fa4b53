"""Installs tools into an environment, following SPEC §9 step by step, and renders their Tool Usage text."""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jinja2

from llm_ide.config import PROMPTS_DIR, read_yaml
from llm_ide.environments.base import Environment, EnvironmentFailure
from llm_ide.prompting import render_string
from llm_ide.tools.config import TOOLS_DIR, ToolConfig, ToolConfigError, load_tool_config, tool_config_path

log = logging.getLogger("llm_ide.tools")

EnvKind = Literal["docker", "local"]
DOCKER_TOOLS_ROOT = "/tools"
LOCAL_TOOLS_ROOT = "$TOOLS_ROOT"  # shown by `plan` for the local environment: a new directory per run
STEP_TIMEOUT = 900.0
PIP_ENV = "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore PIP_PROGRESS_BAR=off"
OUTPUT_TAIL = 6000


@dataclass(frozen=True)
class Step:
    name: str  # prepare | copy | environment | verify | pip | executable | setup
    command: str  # the shell command (for `copy`: what is copied where)
    copy: tuple[Path, str] | None = None


@dataclass(frozen=True)
class InstalledTool:
    name: str
    version: str | None
    invocation: str  # how the agent calls it: `<executable>`, the venv's bin path, or `conda run -n <name> ...`
    usage: str  # the rendered `usage`
    commands: tuple[str, ...]  # the command words the agent types to call it (to spot its output in observations)
    config: ToolConfig = field(repr=False)


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


@dataclass
class InstallReport:
    installed: list[InstalledTool] = field(default_factory=list)
    failed: list[FailedTool] = field(default_factory=list)


class StepFailed(Exception):
    def __init__(self, failure: FailedTool) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def quote(value: str) -> str:
    """shlex.quote, except that the `$TOOLS_ROOT` placeholder of a local plan stays readable."""
    return value if re.fullmatch(r"[\w@%+=:,./$-]+", value) else shlex.quote(value)


def render_template(source: str, variables: dict[str, Any]) -> str:
    return render_string(source, **variables)


@dataclass(frozen=True)
class Target:
    """Where tools go: the environment's tools root, whether it has conda, whether it is the local host."""

    tools_root: str
    conda: bool = False
    local: bool = False


Isolation = Literal["conda", "venv", "overlay", "none"]


def isolation(tool: ToolConfig, target: Target) -> Isolation:
    """py_standalone: conda where present, else a venv with that Python. Without it: the environment's own Python
    in a container; on the local host an overlay venv (`--system-site-packages`) of `python3`, so that a run never
    installs into the user's interpreter."""
    if tool.py_standalone:
        return "conda" if target.conda else "venv"
    return "overlay" if target.local else "none"


def tool_dir(tool: ToolConfig, target: Target) -> str:
    return f"{target.tools_root}/{tool.tool_name}"


def venv_dir(tool: ToolConfig, target: Target) -> str:
    return f"{target.tools_root}/envs/{tool.tool_name}"


def python_command(tool: ToolConfig, target: Target) -> str:
    """The interpreter pip runs with."""
    match isolation(tool, target):
        case "conda":
            return f"conda run -n {tool.tool_name} python"
        case "venv" | "overlay":
            return quote(f"{venv_dir(tool, target)}/bin/python")
        case _:
            return "python3"


def invocation(tool: ToolConfig, target: Target) -> str:
    match isolation(tool, target):
        case "conda":
            return f"conda run -n {tool.tool_name} {tool.executable}"
        case "venv" | "overlay":
            program, _, arguments = tool.executable.partition(" ")
            return " ".join(part for part in (quote(f"{venv_dir(tool, target)}/bin/{program}"), arguments) if part)
        case _:
            return tool.executable


def version_check(version: str) -> str:
    """Python code that prints the interpreter's version and fails unless it is `version` (to its precision)."""
    parts = len(version.split("."))
    return (
        f'import sys; have = ".".join(map(str, sys.version_info[:{parts}])); print("Python", sys.version.split()[0]);'
        f' sys.exit(0 if have == "{version}" else "Python " + have + " found, {version} wanted")'
    )


def interpreter_candidates(version: str) -> list[str]:
    numbers = version.split(".")
    exact = f"python{'.'.join(numbers[:2])}" if len(numbers) >= 2 else f"python{numbers[0]}"
    return list(dict.fromkeys([exact, f"python{numbers[0]}"]))


def venv_command(version: str, target: str) -> str:
    """Create a venv with the first of python<X.Y>, python<X> that runs and has the requested version."""
    candidates = interpreter_candidates(version)
    check = quote(version_check(version))
    tried = ", ".join(candidates)
    return (
        f'PY=""; for candidate in {" ".join(candidates)}; do if command -v "$candidate" >/dev/null 2>&1'
        f' && "$candidate" -c {check} >/dev/null 2>&1; then PY="$candidate"; break; fi; done;'
        f' [ -n "$PY" ] || {{ echo "no working Python {version} interpreter found (tried {tried})"; false; }}'
        f' && "$PY" -m venv --clear {quote(target)}'
    )


def environment_steps(tool: ToolConfig, target: Target) -> list[Step]:
    python, venv = python_command(tool, target), venv_dir(tool, target)
    match isolation(tool, target):
        case "conda":
            create = f"conda create -n {tool.tool_name} python={tool.py_standalone} -y"
        case "venv":
            create = venv_command(str(tool.py_standalone), venv)
        case "overlay":  # pip and setuptools from the base interpreter when it has them (fast, no index needed)
            create = f"python3 -m venv --clear --without-pip --system-site-packages {quote(venv)}"
            pip = f"{{ {python} -m pip --version >/dev/null 2>&1 || {python} -m ensurepip --default-pip; }}"
            return [Step("environment", f"{create} && {pip}"), Step("verify", f"{python} -m pip --version")]
        case _:
            return []
    verify = f"{python} -c {quote(version_check(str(tool.py_standalone)))} && {python} -m pip --version"
    return [Step("environment", create), Step("verify", verify)]


def pip_command(tool: ToolConfig, target: Target) -> str:
    python = python_command(tool, target)
    # The environment's own Python in a container: Debian marks it as externally managed (PEP 668).
    unmanaged = " PIP_BREAK_SYSTEM_PACKAGES=1" if isolation(tool, target) == "none" else ""
    environment = f"export {PIP_ENV}{unmanaged}"
    pip = f"{python} -m pip install"
    if tool.source is None:
        return f"{environment} && {pip} {quote(f'{tool.tool_name}=={tool.version}')}"
    # Without build isolation no index is needed (setuptools comes from the environment); when that fails (e.g.
    # setuptools too old for PEP 660 and no `wheel`), pip builds in isolation with setuptools from the index.
    return (
        f"cd {quote(tool_dir(tool, target))} && {environment} &&"
        f" if {python} -c 'import setuptools' >/dev/null 2>&1;"
        f" then {pip} --no-build-isolation -e . || {pip} -e .; else {pip} -e .; fi"
    )


def executable_check(tool: ToolConfig, target: Target) -> str:
    if isolation(tool, target) == "conda":
        return f"conda run -n {tool.tool_name} sh -c {quote(f'command -v {tool.executable.split()[0]}')}"
    resolved = invocation(tool, target).split()[0]
    return f"command -v {resolved} || {{ echo {quote(f'{resolved}: not found after installation')}; false; }}"


def tool_variables(tool: ToolConfig, target: Target, variables: dict[str, Any]) -> dict[str, Any]:
    return {
        **variables,
        "tools_root": target.tools_root,
        "tool_name": tool.tool_name,
        "tool_dir": tool_dir(tool, target),
        "version": tool.version,
        "executable": tool.executable,
        "invocation": invocation(tool, target),
        "python": python_command(tool, target),
    }


def steps(tool: ToolConfig, target: Target, variables: dict[str, Any]) -> list[Step]:
    """SPEC §9's installation, in order. Raises jinja2 errors when `setup_script` needs a variable not given."""
    planned: list[Step] = []
    if tool.source is not None:
        folder = tool_dir(tool, target)
        planned.append(Step("prepare", f"rm -rf {quote(folder)} && mkdir -p {quote(target.tools_root)}"))
        planned.append(Step("copy", f"copy {tool.source} -> {folder}", copy=(tool.source, folder)))
    planned += environment_steps(tool, target)
    planned.append(Step("pip", pip_command(tool, target)))
    planned.append(Step("executable", executable_check(tool, target)))
    if tool.setup_script and tool.setup_script.strip():
        planned.append(Step("setup", render_template(tool.setup_script, tool_variables(tool, target, variables))))
    return planned


def example_variables(env_kind: EnvKind, tools_root: str) -> dict[str, Any]:
    workdir = "/testbed" if env_kind == "docker" else "$REPO"
    return {
        "workdir": workdir,
        "repo": workdir,
        "instance_id": "$INSTANCE_ID",
        "run_id": "$RUN_ID",
        "tools_root": tools_root,
    }


def plan(
    tool: ToolConfig,
    env_kind: EnvKind,
    conda: bool = False,
    tools_root: str | None = None,
    variables: dict[str, Any] | None = None,
) -> list[str]:
    """The exact commands `install_tool` would run (copies shown as `copy SRC -> DEST`)."""
    root = tools_root or (DOCKER_TOOLS_ROOT if env_kind == "docker" else LOCAL_TOOLS_ROOT)
    target = Target(root, conda=conda, local=env_kind == "local")
    return [step.command for step in steps(tool, target, variables or example_variables(env_kind, root))]


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


def command_words(usage: str, invocation_text: str) -> tuple[str, ...]:
    """The words that call the tool: its invocation's first word and any `<that word>-suffix` the usage mentions
    (e.g. `debugger` and `debugger-commands`)."""
    first = invocation_text.split()[0]
    mentioned = re.findall(r"(?<![\w/.-])" + re.escape(first) + r"[\w.-]*", usage)
    return tuple(dict.fromkeys([first, *mentioned]))


def has_conda(env: Environment) -> bool:
    return env.execute("command -v conda", timeout=60).returncode == 0


def install_tool(
    env: Environment, tool: ToolConfig, variables: dict[str, Any], target: Target, timeout: float = STEP_TIMEOUT
) -> InstalledTool:
    """Runs the steps; raises StepFailed with the failing step's command and output."""
    values = tool_variables(tool, target, variables)
    try:
        planned = steps(tool, target, variables)
    except jinja2.TemplateError as error:
        raise StepFailed(FailedTool(tool.tool_name, "setup", "(setup_script template)", str(error))) from None
    for step in planned:
        run_step(env, tool, step, timeout)
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
    )


def environment_kind(env: Environment) -> EnvKind:
    from llm_ide.environments.local import LocalEnvironment

    return "local" if isinstance(env, LocalEnvironment) else "docker"


def install_tools(
    env: Environment,
    tools: Sequence[str | ToolConfig],
    variables: dict[str, Any] | None = None,
    tools_dir: Path = TOOLS_DIR,
    timeout: float = STEP_TIMEOUT,
    on_event: Callable[[str, str], None] | None = None,
    env_kind: EnvKind | None = None,
) -> InstallReport:
    """Installs each tool (by name, yaml path or config); a tool that fails is reported and left out."""
    report = InstallReport()
    configs: list[ToolConfig] = []
    for entry in tools:
        if isinstance(entry, ToolConfig):
            configs.append(entry)
            continue
        try:
            configs.append(load_tool_config(tool_config_path(entry, tools_dir)))
        except ToolConfigError as error:
            report.failed.append(FailedTool(str(entry), "config", "(load the tool yaml)", str(error)))
    conda = any(tool.py_standalone for tool in configs) and has_conda(env)
    target = Target(env.tools_root, conda=conda, local=(env_kind or environment_kind(env)) == "local")
    for tool in configs:
        if on_event:
            on_event(tool.tool_name, "installing")
        try:
            report.installed.append(install_tool(env, tool, dict(variables or {}), target, timeout))
        except StepFailed as failed:
            report.failed.append(failed.failure)
    for failure in report.failed:
        log.warning("tool %s is left out: %s", failure.name, failure.reason)
        if on_event:
            on_event(failure.name, "failed")
    return report


def tool_usage_text(installed: Sequence[InstalledTool]) -> str:
    """The prompt's Tool Usage section, from llm_ide/prompts/tools.yaml."""
    templates = read_yaml(PROMPTS_DIR / "tools.yaml")
    return render_template(templates["tool_usage"], {"tools": list(installed)})
