"""Grading a test log by SWE-bench's rules: log parsers, the recorded test exit code, FAIL_TO_PASS / PASS_TO_PASS.

The rules follow the official harness (swebench 5.0.2, `swebench/harness/grading.py`); its log parsers are used when
the package is installed, and the pytest parsers below (same cuts: whitespace ends a test id) otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from llm_ide.errors import LlmIdeError
from llm_ide.swebench.dataset import Instance

START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
EXIT_CODE_MARKER = ">>>>> Test Exit Code"
EXIT_CODE_VAR = "SWEBENCH_TEST_EXIT_CODE"
# markers the harness writes on failure: a log holding one of them has no verdict
FAILURE_MARKERS = (">>>>> Patch Apply Failed", ">>>>> Reset Failed", ">>>>> Tests Errored", ">>>>> Tests Timed Out")
STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
PASSING = frozenset({"PASSED", "XFAIL"})
FAILING = frozenset({"FAILED", "ERROR"})
PYTEST_SUMMARY = re.compile(r"^=+ .*\b\d+ (passed|failed|errors?|skipped|xfailed|xpassed)\b.* in [\d.]+s", re.M)
PYTEST_FINAL_BAR = re.compile(r"^=+ .* in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))? =+$", re.M)
PYTEST_STATUS_LINE = re.compile(r"^(?:FAILED|PASSED|SKIPPED|ERROR|XFAIL) \S", re.M)
EXIT_CODE_LINE = re.compile(rf"{re.escape(EXIT_CODE_MARKER)}:\s*(-?\d+)")

Parser = Callable[[str], dict[str, str]]


def _status_line(line: str) -> list[str] | None:
    """`STATUS id …` split on whitespace, or None; SKIPPED's `[N] file:line: reason` summary is no test."""
    if not line.startswith(STATUSES):
        return None
    words = line.split()
    if len(words) < 2 or (words[0] == "SKIPPED" and re.fullmatch(r"\[\d+\]", words[1])):
        return None
    return words


def _pytest_lines(log: str) -> list[tuple[str, str]]:
    """(id, status) of each `STATUS id …` line; FAILED's ` - message` separators become spaces, as in swebench."""
    pairs = []
    for line in log.split("\n"):
        words = _status_line(line.replace(" - ", " ") if line.startswith("FAILED") else line)
        if words:
            pairs.append((words[1], words[0]))
    return pairs


def parse_log_pytest(log: str) -> dict[str, str]:
    """swebench's `parse_log_pytest`: the id is the second word (a parameter id is cut at its first space, an XFAIL
    reason dropped)."""
    return dict(_pytest_lines(log))


def parse_log_pytest_options(log: str) -> dict[str, str]:
    """swebench's `parse_log_pytest_options`: as `parse_log_pytest`, a path-like parameter shortened to its name."""
    statuses: dict[str, str] = {}
    for name, status in _pytest_lines(log):
        match = re.search(r"(.*?)\[(.*)\]", name)
        if match:
            base, option = match.groups()
            if option.startswith("/") and not option.startswith("//") and "*" not in option:
                option = "/" + option.rsplit("/", 1)[-1]
            name = f"{base}[{option}]"
        statuses[name] = status
    return statuses


def parse_log_pytest_v2(log: str) -> dict[str, str]:
    """swebench's `parse_log_pytest_v2`: colour codes dropped, the whole rest of the line is the id (FAILED: up to
    ` - `), and old pytest's `id STATUS` lines."""
    statuses: dict[str, str] = {}
    control = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))
    for raw in log.split("\n"):
        line = re.sub(r"\[(\d+)m", "", raw).translate(control)
        if line.startswith(STATUSES):
            words = _status_line(line.split(" - ", 1)[0] if line.startswith("FAILED") else line)
            if words:
                statuses[" ".join(words[1:])] = words[0]
        elif line.endswith(STATUSES):
            words = line.split()
            if len(words) >= 2:
                statuses[" ".join(words[:-1])] = words[-1]
    return statuses


FALLBACK_PARSERS: dict[str, Parser] = {
    **dict.fromkeys(
        [
            "parse_log_pytest",
            "parse_log_astroid",
            "parse_log_flask",
            "parse_log_marshmallow",
            "parse_log_pvlib",
            "parse_log_pyvista",
            "parse_log_sqlfluff",
            "parse_log_xarray",
        ],
        parse_log_pytest,
    ),
    **dict.fromkeys(
        ["parse_log_pytest_options", "parse_log_pydicom", "parse_log_requests", "parse_log_pylint"],
        parse_log_pytest_options,
    ),
    **dict.fromkeys(
        ["parse_log_pytest_v2", "parse_log_astropy", "parse_log_scikit", "parse_log_sphinx"], parse_log_pytest_v2
    ),
}


class GradingError(LlmIdeError):
    """The log cannot be graded with this parser (unknown or unavailable)."""


def swebench_parsers() -> dict[str, Callable[..., dict[str, str]]] | None:
    """swebench's PARSER_REGISTRY when a 5.x release (the rules followed here) is installed."""
    try:
        from swebench import __version__
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError:
        return None
    major = __version__.split(".", 1)[0]
    return PARSER_REGISTRY if major == "5" else None


def log_parser(name: str | None) -> Parser:
    """The instance's `log_parser` from the swebench package (5.x) when installed; our pytest parsers otherwise."""
    name = name or "parse_log_pytest"
    registry = swebench_parsers()
    if registry is None:
        if name in FALLBACK_PARSERS:
            return FALLBACK_PARSERS[name]
        raise GradingError(
            f"log parser {name} needs the swebench package 5.x (pip install 'swebench>=5.0.2,<6'), or use the official "
            "harness"
        )
    if name not in registry:
        raise GradingError(f"unknown log parser {name} (not in swebench's PARSER_REGISTRY)")
    parser = registry[name]
    return lambda log: parser(log, None)


def record_exit_code(script: str) -> str:
    """Record the test command's own exit status: `$?` saved just before the end marker, echoed just after it
    (the harness's `record_test_exit_code`). A script without the end marker is left as it is."""
    lines = script.split("\n")
    for index, line in enumerate(lines):
        if END_MARKER in line:
            recorded = [f"{EXIT_CODE_VAR}=$?", line, f'echo "{EXIT_CODE_MARKER}: ${EXIT_CODE_VAR}"']
            return "\n".join([*lines[:index], *recorded, *lines[index + 1 :]])
    return script


def recorded_exit_code(log: str) -> int | None:
    """The recorded exit code: the last record in the log (the script echoes it after everything the tests print)."""
    codes = EXIT_CODE_LINE.findall(log)
    return int(codes[-1]) if codes else None


def suite_ran(log: str) -> bool:
    """Evidence that a test runner ran although no test status was parsed (swebench's SUITE_RAN when installed)."""
    try:
        from swebench.harness.grading import SUITE_RAN
    except ImportError:
        return bool(PYTEST_SUMMARY.search(log))
    return bool(SUITE_RAN.search(log))


@dataclass
class LogReading:
    statuses: dict[str, str]
    valid: bool  # False: the log gives no verdict (the instance is unresolved)
    reason: str = ""
    exit_code: int | None = None


def read_test_log(log: str, parser: Parser) -> LogReading:
    """The harness's `get_logs_eval`: the status map between the markers, or no verdict when the log shows a
    failure marker, lacks the markers, shows no test ran, or shows no failure while the tests exited non-zero.
    Stricter than the harness: status lines printed after pytest's final summary bar (by the tests' own code at
    exit) are a forgery, whatever the exit code."""
    exit_code = recorded_exit_code(log)
    if any(marker in log for marker in FAILURE_MARKERS):
        return LogReading({}, False, "the log holds a harness failure marker", exit_code)
    if START_MARKER not in log or END_MARKER not in log.split(START_MARKER, 1)[1]:
        return LogReading({}, False, "no test-output markers in the log", exit_code)
    output = log.split(START_MARKER, 1)[1].split(END_MARKER, 1)[0]
    statuses = parser(output) or parser(log)
    if not statuses and not suite_ran(log):
        return LogReading({}, False, "no test ran", exit_code)
    if exit_code not in (None, 0) and statuses and not FAILING & set(statuses.values()):
        return LogReading(
            {}, False, f"the log shows no failure but the tests exited with {exit_code}: output not trusted", exit_code
        )
    bars = list(PYTEST_FINAL_BAR.finditer(output))
    if bars and PYTEST_STATUS_LINE.search(output, bars[-1].end()):
        return LogReading({}, False, "test status lines after pytest's final summary: output not trusted", exit_code)
    return LogReading(statuses, True, "", exit_code)


def _key(test: str, statuses: dict[str, str]) -> str | None:
    """The status-map key of `test`; an id cut inside its parameters (more `[` than `]`) matches by prefix when
    every candidate agrees on pass or fail (the harness's rule for the truncated ids in the dataset)."""
    if test in statuses:
        return test
    if test.count("[") > test.count("]"):
        matches = [key for key in statuses if key.startswith(test)]
        if matches and len({statuses[key] in PASSING for key in matches}) == 1:
            return matches[0]
    return None


def grade(instance: Instance, statuses: dict[str, str]) -> tuple[str, dict[str, list[str]], dict[str, list[str]]]:
    """resolved iff every FAIL_TO_PASS test passes (PASSED/XFAIL) and every PASS_TO_PASS test passes or is skipped;
    a missing, failed, errored or skipped FAIL_TO_PASS test fails. `eval_type: fail_only` counts only FAILED."""
    fail_only = instance.row.get("eval_type") == "fail_only"
    f2p: dict[str, list[str]] = {"success": [], "failure": []}
    p2p: dict[str, list[str]] = {"success": [], "failure": []}
    for tests, outcome, allowed in (
        (instance.fail_to_pass, f2p, PASSING),
        (instance.pass_to_pass, p2p, PASSING | {"SKIPPED"}),
    ):
        for test in tests:
            if fail_only:
                outcome["failure" if statuses.get(test) == "FAILED" else "success"].append(test)
                continue
            key = _key(test, statuses)
            if key is not None and statuses[key] in allowed:
                outcome["success"].append(test)
            elif key is None or statuses[key] in FAILING | {"SKIPPED"}:
                outcome["failure"].append(test)
    resolved = not f2p["failure"] and not p2p["failure"]
    return ("resolved" if resolved else "unresolved"), f2p, p2p
