"""Regression tests of a patch: the repository's test files that touch the files it edits (named after one, or naming
its module), run with `reproduction.regression_command` before (the base commit) and after (the patch); a test that
passed before and does not now is a regression."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from llm_ide.environments import Environment
from llm_ide.prompting import render_string

EDITED = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)", re.MULTILINE)


def edited_files(patch: str) -> list[str]:
    return list(dict.fromkeys(after for _, after in EDITED.findall(patch)))


def is_test(path: str) -> bool:
    return bool(TEST_FILE.search(path)) or "/tests/" in f"/{path}"


def source_stems(edited: list[str]) -> list[str]:
    """The module names of the edited Python source files (tests and packages' `__init__` left out)."""
    stems = [PurePosixPath(path).stem for path in edited if path.endswith(".py") and not is_test(path)]
    return [stem for stem in dict.fromkeys(stems) if stem != "__init__"]


def touching(env: Environment, stems: list[str], limit: int) -> list[str]:
    """Test files of the repository at its base that touch the modules `stems`: `test_<stem>.py` first, then those
    whose name holds a stem, then those that import one; at most `limit`."""
    _, output = env.run_trusted("git ls-files -z -- '*.py'", 120)
    files = [path for path in output.decode("utf-8", "replace").split("\0") if path and TEST_FILE.search(path)]
    subject = {path: PurePosixPath(path).stem.removeprefix("test_").removesuffix("_test") for path in files}
    exact = [path for path in files if subject[path] in stems]
    named = [path for path in files if path not in exact and any(stem in subject[path] for stem in stems)]
    chosen = [*exact, *named]
    rest = " ".join(shlex.quote(path) for path in files if path not in chosen)
    if rest and len(chosen) < limit:
        alternatives = "|".join(re.escape(stem) for stem in stems)
        imports = shlex.quote(rf"(import|from)[[:space:]]+[[:alnum:]_.]*\b({alternatives})\b")
        _, found = env.run_trusted(f"grep -l -E {imports} -- {rest} 2>/dev/null", 120)
        chosen += [line for line in found.decode("utf-8", "replace").splitlines() if line]
    return chosen[:limit]


def passed_tests(env: Environment, files: list[str], settings: Any) -> dict[str, Any]:
    """The tests of `files` that pass here: {passed: [ids], ran: [ids], returncode, timed_out}."""
    own = settings.reproduction
    command = render_string(own.regression_command, files=" ".join(shlex.quote(path) for path in files))
    result = env.execute(command, timeout=own.regression_timeout)
    outcomes = OUTCOME.findall(result.output)
    return {
        "passed": sorted({test for outcome, test in outcomes if outcome in ("PASSED", "XFAIL")}),
        "ran": sorted({test for _, test in outcomes}),
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "seconds": round(result.duration, 3),
    }
