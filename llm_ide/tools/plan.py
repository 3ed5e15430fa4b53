"""The commands that install a tool (SPEC §9), split into the build (cached) and the per-run part."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jinja2

from llm_ide.prompting import render_string
from llm_ide.tools.config import ToolConfig

EnvKind = Literal["docker", "local"]
Isolation = Literal["conda", "venv", "overlay"]
DOCKER_TOOLS_ROOT = "/tools"
LOCAL_TOOLS_ROOT = "$TOOLS_ROOT"  # shown by `plan` for the local environment: the tool's cache entry
LINK_DIR = "/usr/local/bin"  # in a container, a plain tool's commands are linked here (on PATH, as pip put them)
# No version self-check, prompt or progress bar; no check of every installed distribution's requirements after the
# install (a warning nobody reads, and the tool's environment sees all of the project's: ~0.2 s of CPU with 250 of
# them). pip reads a `--no-X` option's variable as X's value: PIP_NO_WARN_CONFLICTS=0 is `--no-warn-conflicts`, and a
# variable an old pip does not know is ignored where the option would be an error.
PIP_ENV = (
    "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore PIP_PROGRESS_BAR=off"
    " PIP_NO_WARN_CONFLICTS=0"
)
BUILD_STEPS = ("prepare", "copy", "environment", "verify", "pip")  # what the cache keeps; the rest runs every time
CHECK_STEPS = ("executable", "check")  # of the rest, what a local cache entry proves once (tools/checked.py)
IDENTITY = (
    "import os, platform, sys; "
    'print(os.path.realpath(sys.executable), platform.machine(), sys.version.replace("\\n", " "))'
)
# Whether the environment's setuptools builds an editable wheel by itself (no index): from 70.1 it has bdist_wheel,
# before that only with `wheel` installed (Python 3.11's stock setuptools 65.5 has neither). Python 3.6 reads it.
# The version from the one `setuptools-X.Y…-info` beside the package, without importing it (0.1 s of CPU less a build),
# else from the import; where it is wrong, the build without isolation fails and pip builds in isolation, as it would.
BUILDS_WITHOUT_INDEX = (
    'import glob, importlib.util, os, re; spec = importlib.util.find_spec("setuptools");'
    ' infos = glob.glob(os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "setuptools-*-info"));'
    ' found = re.match(r"setuptools-(\\d+)\\.(\\d+)", os.path.basename(infos[0])) if len(infos) == 1 else None;'
    ' version = found.groups() if found else __import__("setuptools").__version__.split(".")[:2];'
    ' raise SystemExit(0 if tuple(map(int, version)) >= (70, 1) or importlib.util.find_spec("wheel") else 1)'
)


@dataclass(frozen=True)
class Step:
    name: str  # prepare | copy | environment | verify | pip | link | executable | setup
    command: str  # the shell command (for `copy`: what is copied where)
    copy: tuple[Path, str] | None = None


@dataclass(frozen=True)
class Target:
    """Where tools go: the environment's tools root, whether it has conda, whether it is the local host."""

    tools_root: str
    conda: bool = False
    local: bool = False


def quote(value: str) -> str:
    """shlex.quote, except that the `$TOOLS_ROOT` placeholder of a local plan stays readable."""
    return value if re.fullmatch(r"[\w@%+=:,./$-]+", value) else shlex.quote(value)


def render_template(source: str, variables: dict[str, Any]) -> str:
    return render_string(source, **variables)


def isolation(tool: ToolConfig, target: Target) -> Isolation:
    """py_standalone: conda where present, else a venv with that Python. Without it: an overlay venv
    (`--system-site-packages`) of the environment's `python3`, so that the tool sees the project's packages, is never
    installed into the project's interpreter, and lives under the tools root (where the cache can keep it)."""
    if tool.py_standalone:
        return "conda" if target.conda else "venv"
    return "overlay"


def tool_dir(tool: ToolConfig, target: Target) -> str:
    return f"{target.tools_root}/{tool.tool_name}"


def venv_dir(tool: ToolConfig, target: Target) -> str:
    return f"{target.tools_root}/envs/{tool.tool_name}"


def python_command(tool: ToolConfig, target: Target) -> str:
    """The interpreter pip runs with."""
    if isolation(tool, target) == "conda":
        return f"conda run -n {tool.tool_name} python"
    return quote(f"{venv_dir(tool, target)}/bin/python")


def invocation(tool: ToolConfig, target: Target) -> str:
    """How the agent calls the tool: `conda run …`, the venv's bin path, or (a plain tool in a container) its name."""
    kind = isolation(tool, target)
    if kind == "conda":
        return f"conda run -n {tool.tool_name} {tool.executable}"
    if kind == "overlay" and not target.local:
        return tool.executable
    program, _, arguments = tool.executable.partition(" ")
    return " ".join(part for part in (quote(f"{venv_dir(tool, target)}/bin/{program}"), arguments) if part)


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


def find_interpreter(version: str) -> str:
    """Sets $PY to the first of python<X.Y>, python<X> that runs and has the requested version, else fails."""
    candidates = interpreter_candidates(version)
    check = quote(version_check(version))
    return (
        f'PY=""; for candidate in {" ".join(candidates)}; do if command -v "$candidate" >/dev/null 2>&1'
        f' && "$candidate" -c {check} >/dev/null 2>&1; then PY="$candidate"; break; fi; done;'
        f' [ -n "$PY" ] || {{ echo "no working Python {version} interpreter found (tried {", ".join(candidates)})";'
        " false; }"
    )


def venv_command(version: str, target: str) -> str:
    return f'{find_interpreter(version)} && "$PY" -m venv --clear {quote(target)}'


def interpreter_probe(tool: ToolConfig, target: Target) -> str:
    """A command printing one line that identifies the interpreter the tool's environment is built from (part of the
    cache key): its real path, machine and full version; for conda, conda's own path and the machine. Run at every
    run's start, without `site` (-S: not needed to tell the interpreter; a quarter of its start)."""
    match isolation(tool, target):
        case "conda":
            return 'printf "conda %s %s\\n" "$(readlink -f "$(command -v conda)")" "$(uname -m)"'
        case "venv":  # the interpreter `find_interpreter` picks, with one start of each candidate
            version = str(tool.py_standalone)
            parts = len(version.split("."))
            wanted = f'".".join(map(str, sys.version_info[:{parts}])) == "{version}"'
            code = f"import sys; {wanted} or sys.exit(1); {IDENTITY}"
            candidates = " ".join(interpreter_candidates(version))
            return (
                f'found=""; for candidate in {candidates}; do if command -v "$candidate" >/dev/null 2>&1'
                f' && "$candidate" -S -c {quote(code)} 2>/dev/null; then found=1; break; fi; done; [ -n "$found" ]'
            )
        case _:
            return f"python3 -S -c {quote(IDENTITY)}"


def environment_steps(tool: ToolConfig, target: Target) -> list[Step]:
    python, venv = python_command(tool, target), venv_dir(tool, target)
    match isolation(tool, target):
        case "conda":
            create = f"conda create -n {tool.tool_name} python={tool.py_standalone} -y"
        case "venv":
            create = venv_command(str(tool.py_standalone), venv)
        case _:  # pip and setuptools from the base interpreter when it has them (fast, no index needed), else its own
            create = f"python3 -m venv --clear --without-pip --system-site-packages {quote(venv)}"
            pip = f"{python} -m pip --version"
            return [
                Step("environment", create),
                Step("verify", f"{pip} || {{ {python} -m ensurepip --default-pip && {pip}; }}"),
            ]
    verify = f"{python} -c {quote(version_check(str(tool.py_standalone)))} && {python} -m pip --version"
    return [Step("environment", create), Step("verify", verify)]


def pip_command(tool: ToolConfig, target: Target) -> str:
    python = python_command(tool, target)
    environment = f"export {PIP_ENV}"
    pip = f"{python} -m pip install"
    if tool.source is None:
        return f"{environment} && {pip} {quote(f'{tool.tool_name}=={tool.version}')}"
    # Without build isolation no index is needed (setuptools comes from the environment); where that setuptools
    # can't build a wheel, or the build fails (e.g. too old for a [project] table), pip builds in isolation with
    # setuptools from the index.
    return (
        f"cd {quote(tool_dir(tool, target))} && {environment} &&"
        f" if {python} -c {quote(BUILDS_WITHOUT_INDEX)} >/dev/null 2>&1;"
        f" then {pip} --no-build-isolation -e . || {pip} -e .; else {pip} -e .; fi"
    )


def link_command(tool: ToolConfig, target: Target) -> str:
    """Links the commands the tool installed into its venv (not python, pip or activate) onto PATH."""
    bin_dir = quote(f"{venv_dir(tool, target)}/bin")
    return (
        f"mkdir -p {LINK_DIR} && for f in {bin_dir}/*; do case ${{f##*/}} in"
        f' python*|pip*|activate*|Activate*|easy_install*) ;; *) ln -sf "$f" {LINK_DIR}/ ;; esac; done'
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


def build_steps(tool: ToolConfig, target: Target) -> list[Step]:
    """The steps whose result the cache keeps: the tool's copy and its environment."""
    planned: list[Step] = []
    if tool.source is not None:
        folder = tool_dir(tool, target)
        planned.append(Step("prepare", f"rm -rf {quote(folder)} && mkdir -p {quote(target.tools_root)}"))
        planned.append(Step("copy", f"copy {tool.source} -> {folder}", copy=(tool.source, folder)))
    return [*planned, *environment_steps(tool, target), Step("pip", pip_command(tool, target))]


class ScriptError(ValueError):
    """A script of the tool's yaml (`key`) whose template does not render, e.g. a variable not given."""

    def __init__(self, step: str, key: str, error: jinja2.TemplateError) -> None:
        super().__init__(str(error))
        self.step, self.key = step, key


def run_steps(tool: ToolConfig, target: Target, variables: dict[str, Any]) -> list[Step]:
    """The steps of every run, cached or not (CHECK_STEPS: those a local cache entry may have proved already).
    Raises ScriptError when a script needs a variable not given."""
    planned: list[Step] = []
    if isolation(tool, target) == "overlay" and not target.local:
        planned.append(Step("link", link_command(tool, target)))
    planned.append(Step("executable", executable_check(tool, target)))
    values = tool_variables(tool, target, variables)
    for name, key, script in (
        ("check", "check_script", tool.check_script),
        ("setup", "setup_script", tool.setup_script),
    ):
        try:
            planned += [Step(name, render_template(script, values))] if script and script.strip() else []
        except jinja2.TemplateError as error:
            raise ScriptError(name, key, error) from None
    return planned


def steps(tool: ToolConfig, target: Target, variables: dict[str, Any]) -> list[Step]:
    """SPEC §9's installation, in order."""
    return [*build_steps(tool, target), *run_steps(tool, target, variables)]


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
    """The exact commands a first (uncached) installation runs (copies shown as `copy SRC -> DEST`)."""
    root = tools_root or (DOCKER_TOOLS_ROOT if env_kind == "docker" else LOCAL_TOOLS_ROOT)
    target = Target(root, conda=conda, local=env_kind == "local")
    return [step.command for step in steps(tool, target, variables or example_variables(env_kind, root))]
