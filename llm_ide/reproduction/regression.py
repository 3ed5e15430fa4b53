"""Regression tests of a patch: the repository's test files that touch the files it edits (named after one, or
importing its module in any form), run with `reproduction.regression_command` before (the base commit) and after (the
patch); a test that passed before and does not now is a regression."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from llm_ide.environments.base import Environment
from llm_ide.prompting import render_string
from llm_ide.reproduction.importers import imports_any, module_names
from llm_ide.reproduction.script import last_line, unverifiable

EDITED = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+::\S+)", re.MULTILINE)
COLLECTION_ERROR = re.compile(r"^ERROR (\S+\.py) - (.+)$", re.MULTILINE)  # pytest -rA: a file it could not collect


def edited_files(patch: str) -> list[str]:
    return list(dict.fromkeys(after for _, after in EDITED.findall(patch)))


def is_test(path: str) -> bool:
    return bool(TEST_FILE.search(path)) or "/tests/" in f"/{path}"


def source_stems(edited: list[str]) -> list[str]:
    """The module names of the edited Python source files (tests left out; a package's `__init__` is the package)."""
    paths = [PurePosixPath(path) for path in edited if path.endswith(".py") and not is_test(path)]
    stems = [path.parent.name if path.stem == "__init__" else path.stem for path in paths]
    return [stem for stem in dict.fromkeys(stems) if stem]


def touching(env: Environment, edited: list[str], limit: int) -> list[str]:
    """Test files of the repository at its base that touch the edited source files: `test_<stem>.py` first, then
    those that import an edited module (in any form: llm_ide/reproduction/importers.py), those among them named
    after one first, then those only named after one; at most `limit`."""
    sources = [path for path in edited if path.endswith(".py") and not is_test(path)]
    stems = source_stems(sources)
    _, output = env.run_trusted("git ls-files -z -- '*.py'", 120)
    python_files = {path for path in output.decode("utf-8", "replace").split("\0") if path}
    files = sorted(path for path in python_files if TEST_FILE.search(path))
    subject = {path: PurePosixPath(path).stem.removeprefix("test_").removesuffix("_test") for path in files}
    exact = [path for path in files if subject[path] in stems]
    named = [path for path in files if path not in exact and any(stem in subject[path] for stem in stems)]
    modules = {name for path in sources for name in module_names(path, python_files)}
    importing = set(importers(env, [path for path in files if path not in exact], stems, modules, python_files))
    chosen = [*exact, *(path for path in named if path in importing), *sorted(importing - set(named))]
    return [*chosen, *(path for path in named if path not in importing)][:limit]


def importers(
    env: Environment, files: list[str], stems: list[str], modules: set[str], python_files: set[str]
) -> list[str]:
    """The files among `files` that import one of `modules`: those naming a stem as a word (one grep), parsed."""
    if not files or not stems:
        return []
    words = shlex.quote("|".join(re.escape(stem) for stem in stems))
    listed = " ".join(shlex.quote(path) for path in files)
    _, found = env.run_trusted(f"grep -l -w -E {words} -- {listed} 2>/dev/null", 120)
    candidates = [line for line in found.decode("utf-8", "replace").splitlines() if line]
    texts = env.read_files(candidates)
    return [
        path
        for path, snapshot in texts.items()
        if snapshot is not None and imports_any(snapshot.data.decode("utf-8", "replace"), path, modules, python_files)
    ]


def passed_tests(env: Environment, files: list[str], settings: Any) -> dict[str, Any]:
    """The tests of `files` that pass here: {passed: [ids], ran: [ids], returncode, timed_out, unrun: {file: why no
    test of it ran}}."""
    own = settings.reproduction
    command = render_string(own.regression_command, files=" ".join(shlex.quote(path) for path in files))
    result = env.execute(command, timeout=own.regression_timeout)
    outcomes = OUTCOME.findall(result.output)
    ran = sorted({test for _, test in outcomes})
    return {
        "passed": sorted({test for outcome, test in outcomes if outcome in ("PASSED", "XFAIL")}),
        "ran": ran,
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "seconds": round(result.duration, 3),
        "unrun": unrun(env, files, ran, result),
    }


def unrun(env: Environment, files: list[str], ran: list[str], result: Any) -> dict[str, str]:
    """Why no test of a file ran, for each such file: the command could not start, the test runner or a module the
    tests import is missing, the file could not be collected, the run timed out, or it holds no test."""
    started = {test.split("::")[0] for test in ran}
    errors = dict(COLLECTION_ERROR.findall(result.output))
    reasons = {}
    for path in (path for path in files if path not in started):
        why = unverifiable(env, result.returncode, result.output) if not ran else ""
        if result.timed_out:
            why = f"the test command timed out after {result.duration:.0f} s"
        reasons[path] = (
            why or errors.get(path) or f"no test of it ran (exit {result.returncode}: {last_line(result.output)})"
        )
    return reasons
