"""Whether bubblewrap can sandbox the local commands here, asked once at a run's set-up (and by the preflight): bwrap
installed and working (it may lack the right to create namespaces, e.g. in a container), the isolation that works
(probed once), and a run without it said once."""

from __future__ import annotations

import logging
import shutil
import subprocess
from functools import cache
from pathlib import Path

from llm_ide.environments.sandbox import ISOLATIONS, Sandbox
from llm_ide.errors import warn_once

log = logging.getLogger("llm_ide.environment")


def sandbox_path(setting: str) -> str | None:
    """bwrap for `environment.sandbox: bwrap` when it works here; None otherwise, said once (`none` too)."""
    if setting == "none":
        warn_unsandboxed("environment.sandbox is none", "environment.sandbox: bwrap")
    return bwrap_path() if setting == "bwrap" else None


def bwrap_path() -> str | None:
    """bwrap when it is installed and works here (it may lack the right to create namespaces, e.g. in a container);
    otherwise None, said once."""
    if problem := bwrap_problem():
        warn_unsandboxed(problem)
        return None
    return shutil.which("bwrap")


def bwrap_problem() -> str | None:
    """Why bwrap cannot sandbox the commands here (not installed, or not working); None when it can. Says nothing."""
    found = shutil.which("bwrap")
    if found is None:
        return "bubblewrap (bwrap) is not installed"
    problem = _probe(found)
    return f"bubblewrap (bwrap) does not work here ({problem})" if isinstance(problem, str) else None


def isolation(bwrap: str) -> tuple[str, ...]:
    """The first of ISOLATIONS that works here (bwrap_problem says when none does)."""
    found = _probe(bwrap)
    return found if isinstance(found, tuple) else ISOLATIONS[-1]


@cache
def _probe(bwrap: str) -> tuple[str, ...] | str:
    """The isolation options that work here, or why none does."""
    problem = ""
    for options in ISOLATIONS:
        argv = Sandbox(bwrap, writable=[], isolation=options).argv(["true"], Path("/"))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode == 0:
            return options
        problem = problem or " ".join(done.stderr.split())[:200] or f"exit status {done.returncode}"
    return problem


def warn_unsandboxed(problem: str, remedy: str = "install the bubblewrap package, or allow user namespaces") -> None:
    message = (
        f"{problem}: local commands run unsandboxed, with access to the whole machine and the agent's "
        f"environment ({remedy}, to contain them)"
    )
    warn_once(log, ("unsandboxed",), message)
