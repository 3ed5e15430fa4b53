"""A reproduction script and its runs: `setup_reproduction_script` installs it beside the tools (in any environment:
the folder is the environment's own), `reproduction_script` runs it from the repository's directory, cut at its
timeout, and tells from its marker line (or its exit status) whether it shows the issue.

A script is a dict (it lives in the run's checkpointed state): `name`, `content`, `source` (given | generated),
`path` (where it is installed) and `before` (its run on the original code). A run is a dict: `returncode`, `output`
(head and tail), `timed_out`, `verdict` (reproduced | resolved | other | timed out), `seconds`."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from llm_ide.environments import Environment
from llm_ide.prompting import render_string, truncate
from llm_ide.reproduction.settings import ReproductionSettings
from llm_ide.text import clean_text

FOLDER = "reproduction"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")

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


def reproduction_script(env: Environment, item: Script, settings: Any) -> Run:
    """Installs the script and runs it on the code as it is now; a hanging one is cut at its timeout (`settings`: the
    run's, its `reproduction` section)."""
    own = settings.reproduction
    path = setup_reproduction_script(env, item)
    result = env.execute(render_string(own.templates.command, path=path, workdir=env.workdir), timeout=own.timeout)
    output = clean_text(result.output).strip("\n")
    return {
        "returncode": result.returncode,
        "output": truncate(output, own.output_chars, settings.templates),
        "timed_out": result.timed_out,
        "verdict": verdict(own, result.returncode, output, result.timed_out),
        "seconds": round(result.duration, 3),
    }


def shown(env: Environment, item: Script, run: Run) -> Script:
    """The script as the prompts show it: where it is, and a run of it."""
    return {**item, "path": installed_path(env, item), "run": run}
