"""A reproduction script and its runs: `setup_reproduction_script` installs it beside the tools (in any environment:
the folder is the environment's own), `reproduction_script` runs it from the repository's directory, cut at its
timeout, and tells from its marker line (or its exit status) whether it shows the issue.

A script is a dict (it lives in the run's checkpointed state): `name`, `content`, `source` (given | generated),
`path` (where it is installed) and `before` (its run on the original code). A run is a dict: `returncode`, `output`
(head and tail), `timed_out`, `verdict` (reproduced | resolved | other | timed out | could not verify, with its
`reason`: the script could not start, or a module it imports is missing, so it never reached the code), `seconds`."""

from __future__ import annotations

import hashlib
import logging
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from llm_ide.environments.base import Environment
from llm_ide.prompting import render_string, truncate
from llm_ide.reproduction.settings import ReproductionSettings
from llm_ide.text import clean_text

log = logging.getLogger("llm_ide.environment")  # on the console as it happens

FOLDER = "reproduction"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")
UNVERIFIED = "could not verify"  # the verdict of a run that says nothing of the code
MISSING_MODULE = re.compile(r"No module named '?([A-Za-z_][A-Za-z0-9_.]*)'?")  # an import's, or `python -m X`'s

Script = dict[str, Any]
Run = dict[str, Any]


def script(content: str, name: str = "reproduce.py", source: str = "given") -> Script:
    """A script given with the task (`--reproduction FILE`, a dataset row's `reproduction`, the Python API)."""
    base = PurePosixPath(name).name
    if not NAME.fullmatch(base):
        base = "reproduce.py"
    return {"name": base, "content": content, "source": source}


def key(item: Script) -> str:
    """A script's identity: its content (the same test written twice is one)."""
    return hashlib.sha1(item["content"].encode("utf-8")).hexdigest()[:12]


def installed_path(env: Environment, item: Script) -> str:
    return f"{env.tools_root}/{FOLDER}/{item['name']}"


def setup_reproduction_script(env: Environment, item: Script) -> str:
    """Installs the script beside the tools (again: the agent may have changed it); where it is."""
    path = installed_path(env, item)
    env.put_private(path, item["content"].encode("utf-8"))
    return path


def remove_reproduction_script(env: Environment, item: Script) -> None:
    env.run_trusted(f"rm -f -- {shlex.quote(installed_path(env, item))}", 60)


def verdict(settings: ReproductionSettings, returncode: int, output: str, timed_out: bool) -> str:
    """The last marker printed wins; without one, the exit status (0: resolved)."""
    if timed_out:
        return "timed out"
    positions = {name: output.rfind(text) for name, text in settings.markers.model_dump().items() if text}
    found = {name: position for name, position in positions.items() if position >= 0}
    if found:
        return max(found, key=lambda name: found[name])
    return "resolved" if returncode == 0 else "reproduced"


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def repository_module(env: Environment, name: str) -> bool:
    """Whether the repository's base commit holds the top-level module `name` (at its root or in src/)."""
    paths = " ".join(shlex.quote(f"{root}{name}{end}") for root in ("", "src/") for end in ("", ".py"))
    returncode, output = env.run_trusted(f"git ls-tree --name-only HEAD -- {paths}", 60)
    if returncode == 0:
        return bool(output.strip())
    found = env.read_files([f"{root}{name}{end}" for root in ("", "src/") for end in ("/__init__.py", ".py")])
    return any(snapshot is not None for snapshot in found.values())


def unverifiable(env: Environment, returncode: int, output: str) -> str:
    """Why a run of a script or a test command says nothing of the code: it could not start (no interpreter, no such
    program), or a module it imports that is not the repository's is missing (no pytest, a dependency not
    installed); '' when it reached the code."""
    if returncode in (126, 127):
        return f"it could not start (exit {returncode}: {last_line(output)})"
    missing = MISSING_MODULE.findall(output)
    if missing and not repository_module(env, missing[-1].split(".")[0]):
        return f"a module it needs is not installed: {missing[-1]} ({last_line(output)})"
    return ""


def reproduction_script(env: Environment, item: Script, settings: Any) -> Run:
    """Installs the script and runs it on the code as it is now; a hanging one is cut at its timeout (`settings`: the
    run's, its `reproduction` section). A run that never reached the code could not verify anything: said."""
    own = settings.reproduction
    path = setup_reproduction_script(env, item)
    result = env.execute(render_string(own.templates.command, path=path, workdir=env.workdir), timeout=own.timeout)
    output = clean_text(result.output).strip("\n")
    reason = "" if result.timed_out else unverifiable(env, result.returncode, output)
    run = {
        "returncode": result.returncode,
        "output": truncate(output, own.output_chars, settings.templates),
        "timed_out": result.timed_out,
        "verdict": UNVERIFIED if reason else verdict(own, result.returncode, output, result.timed_out),
        "seconds": round(result.duration, 3),
    }
    if reason:
        log.warning("reproduction %s could not verify anything: %s", item["name"], reason)
    return run | ({"reason": reason} if reason else {})


def shown(env: Environment, item: Script, run: Run) -> Script:
    """The script as the prompts show it: where it is, and a run of it."""
    return {**item, "path": installed_path(env, item), "run": run}
