"""Grading an evaluation's test log as SWE-bench does: the fallback log parsers against the swebench package's, the
recorded exit code (a forged one in the output does not count), a missing test runner, and the grade of ids cut
inside their parameters (the shared Lite and Verified instances)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llm_ide.swebench.dataset import Instance, load_dataset
from llm_ide.swebench.evaluate import missing_runner
from llm_ide.swebench.grading import FALLBACK_PARSERS, grade, log_parser, read_test_log, record_exit_code

PYTEST_LOG = """\
+ : '>>>>> Start Test Output'
============================= test session starts ==============================
tests/test_a.py F.s                                                       [100%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
PASSED tests/test_a.py::test_param[a b-c]
PASSED tests/test_a.py::test_path[/usr/lib/x.py]
FAILED tests/test_a.py::test_bad - AssertionError: assert 1 == 2 - extra
FAILED tests/test_a.py::test_fail_param[x - y] - assert 0
ERROR tests/test_b.py::test_setup - fixture 'db' not found
SKIPPED [1] tests/test_a.py:12: needs network
SKIPPED tests/test_a.py::test_skipped
XFAIL tests/test_a.py::test_known - reason
XFAIL tests/test_a.py::test_known_param[p q] - known bug
\x1b[32mPASSED\x1b[0m tests/test_c.py::test_colour
tests/test_old.py::test_legacy PASSED
========================= 2 failed, 3 passed in 0.03s ==========================
+ : '>>>>> End Test Output'
"""


def test_fallback_pytest_parser_cuts_ids_and_xfail_reasons_like_swebench() -> None:
    assert FALLBACK_PARSERS["parse_log_pytest"](PYTEST_LOG) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_param[a": "PASSED",
        "tests/test_a.py::test_path[/usr/lib/x.py]": "PASSED",
        "tests/test_a.py::test_bad": "FAILED",
        "tests/test_a.py::test_fail_param[x": "FAILED",
        "tests/test_b.py::test_setup": "ERROR",
        "tests/test_a.py::test_skipped": "SKIPPED",
        "tests/test_a.py::test_known": "XFAIL",
        "tests/test_a.py::test_known_param[p": "XFAIL",
    }


@pytest.mark.parametrize(
    "name",
    ["parse_log_pytest", "parse_log_flask", "parse_log_marshmallow", "parse_log_requests", "parse_log_pylint",
     "parse_log_pytest_options", "parse_log_astropy", "parse_log_sphinx", "parse_log_pytest_v2"],
)  # fmt: skip
def test_fallback_parsers_agree_with_the_swebench_package(name: str) -> None:
    from swebench.harness.log_parsers import PARSER_REGISTRY

    assert FALLBACK_PARSERS[name](PYTEST_LOG) == PARSER_REGISTRY[name](PYTEST_LOG, None)
    assert log_parser(name)(PYTEST_LOG) == PARSER_REGISTRY[name](PYTEST_LOG, None)


def test_without_the_swebench_package_the_fallback_parsers_are_used() -> None:
    code = (
        "import sys; sys.modules['swebench'] = None\n"  # as if the package were not installed
        "from llm_ide.swebench.grading import FALLBACK_PARSERS, GradingError, log_parser\n"
        "assert log_parser('parse_log_flask') is FALLBACK_PARSERS['parse_log_pytest']\n"
        "assert log_parser(None) is FALLBACK_PARSERS['parse_log_pytest']\n"
        "try:\n    log_parser('parse_log_django')\nexcept GradingError as e:\n    print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "log parser parse_log_django needs the swebench package" in result.stdout


def exit_code_log(body: str, code: int) -> str:
    script = record_exit_code("set -uxo pipefail\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n")
    assert script.splitlines()[-3:] == [
        "SWEBENCH_TEST_EXIT_CODE=$?",
        ": '>>>>> End Test Output'",
        'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"',
    ]
    return f"+ : '>>>>> Start Test Output'\n{body}+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: {code}\n"


FORGED = (
    "FAILED t.py::test_f - assert 0\n===== 1 failed, 1 passed in 0.1s =====\nPASSED t.py::test_f\nPASSED t.py::test_p\n"
)


@pytest.mark.parametrize(
    ("log", "valid", "statuses"),
    [
        (exit_code_log(FORGED, 1), False, {}),  # no failure shown, the tests exited 1: forged
        (exit_code_log(FORGED, 0), False, {}),  # exit status zeroed too: status lines after pytest's final bar
        (exit_code_log("PASSED t.py::test_p\n===== 1 passed in 0.10s =====\nbye\n", 0), True,
         {"t.py::test_p": "PASSED"}),
        (exit_code_log("===== 1 passed in 0.10s =====\nPASSED t.py::test_p\n===== 1 passed in 0.20s =====\n", 0), True,
         {"t.py::test_p": "PASSED"}),  # two pytest runs: only lines after the last bar count
        (exit_code_log("FAILED t.py::test_f - x\nPASSED t.py::test_p\n", 1), True,
         {"t.py::test_f": "FAILED", "t.py::test_p": "PASSED"}),
        (exit_code_log("collected 0 items\n", 5), False, {}),  # nothing ran
        (exit_code_log("PASSED t.py::test_p\n>>>>> Tests Errored\n", 0), False, {}),
        ("+ : '>>>>> Start Test Output'\nKilled\n", False, {}),
    ],
)  # fmt: skip
def test_read_test_log_checks_the_recorded_exit_code(log: str, valid: bool, statuses: dict[str, str]) -> None:
    test_log = read_test_log(log, FALLBACK_PARSERS["parse_log_pytest"])
    assert (test_log.valid, test_log.statuses) == (valid, statuses)


def test_a_forged_exit_code_inside_the_output_does_not_count() -> None:
    forged = FORGED + ">>>>> Test Exit Code: 0\n"  # printed by the tests, before the real record
    assert not read_test_log(exit_code_log(forged, 1), FALLBACK_PARSERS["parse_log_pytest"]).valid


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ({"f1": "PASSED", "f2": "XFAIL", "p1": "PASSED", "p2": "SKIPPED"}, "resolved"),
        ({"f1": "PASSED", "f2": "FAILED", "p1": "PASSED", "p2": "PASSED"}, "unresolved"),
        ({"f1": "PASSED", "f2": "PASSED", "p1": "ERROR", "p2": "PASSED"}, "unresolved"),
        ({"f1": "PASSED", "f2": "SKIPPED", "p1": "PASSED", "p2": "PASSED"}, "unresolved"),  # a skipped F2P: not fixed
        ({"f1": "PASSED", "f2": "PASSED", "p1": "PASSED"}, "unresolved"),  # a P2P test that vanished
    ],
)
def test_grade_follows_swebench(statuses: dict[str, str], expected: str) -> None:
    instance = Instance("a__b-1", "p", fail_to_pass=["f1", "f2"], pass_to_pass=["p1", "p2"])
    status, f2p, p2p = grade(instance, statuses)
    assert status == expected
    assert sorted(f2p["success"] + f2p["failure"]) == ["f1", "f2"]
    assert sorted(p2p["success"] + p2p["failure"]) == ["p1", "p2"]


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ({"t.py::test_x[a b]": "PASSED", "t.py::test_x[a c]": "XFAIL"}, "resolved"),  # cut id, candidates agree
        ({"t.py::test_x[a b]": "PASSED", "t.py::test_x[a c]": "FAILED"}, "unresolved"),  # they disagree
        ({"t.py::test_x[ab]": "FAILED"}, "unresolved"),
    ],
)
def test_grade_matches_ids_cut_inside_their_parameters_by_prefix(statuses: dict[str, str], expected: str) -> None:
    instance = Instance("a__b-1", "p", fail_to_pass=["t.py::test_x[a"])
    assert grade(instance, statuses)[0] == expected


def test_grade_fail_only_counts_only_failures() -> None:
    instance = Instance("a__b-1", "p", fail_to_pass=["f1"], pass_to_pass=["p1"], row={"eval_type": "fail_only"})
    assert grade(instance, {})[0] == "resolved"
    assert grade(instance, {"p1": "FAILED"})[0] == "unresolved"


@pytest.mark.parametrize(
    ("log", "code", "problem"),
    [
        ("+ python -m pytest\neval.sh: line 9: python: command not found\n", 127, "not found (exit 127)"),
        (": '>>>>> Start Test Output'\n/usr/bin/python3: No module named pytest\n: '>>>>> End Test Output'\n", 1,
         "the test runner is missing: /usr/bin/python3: No module named pytest"),
        (": '>>>>> Start Test Output'\nFAILED t.py::x - ModuleNotFoundError\n", 1, None),
    ],
)  # fmt: skip
def test_a_missing_test_runner_is_named(log: str, code: int, problem: str | None) -> None:
    found = missing_runner(log, code)
    assert found == problem if problem is None else problem in found


def pytest_log_line(status: str, test: str) -> str:
    """What `pytest -rA` prints for `test`; an id the dataset holds cut inside its parameters gets its rest back."""
    full = f"{test} and more]" if test.count("[") > test.count("]") else test
    return f"{status} {full} - the reason" if status in ("XFAIL", "FAILED") else f"{status} {full}"


def test_real_instances_with_cut_ids_grade_like_swebench(shared_dir: Path) -> None:
    """Every Lite/Verified instance on a pytest parser whose ids are cut: resolved when its F2P tests xfail with a
    reason (pass, for parse_log_pytest_v2, which keeps XFAIL reasons) and its P2P tests pass, unresolved with one F2P
    failure, exactly as swebench's own grading says."""
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    checked = set()
    for path in sorted((shared_dir / "data" / "swebench").glob("*.jsonl")):
        for instance in load_dataset(str(path)).instances:
            tests = instance.fail_to_pass + instance.pass_to_pass
            if instance.log_parser not in FALLBACK_PARSERS or not any(t.count("[") > t.count("]") for t in tests):
                continue
            checked.add(instance.instance_id)
            parser = FALLBACK_PARSERS[instance.log_parser]
            fixed = "PASSED" if parser is FALLBACK_PARSERS["parse_log_pytest_v2"] else "XFAIL"
            lines = [pytest_log_line(fixed, t) for t in instance.fail_to_pass]
            lines += [pytest_log_line("PASSED", t) for t in instance.pass_to_pass]
            failing = [pytest_log_line("FAILED", instance.fail_to_pass[0]), *lines[1:]]
            for log, expected in (("\n".join(lines), "resolved"), ("\n".join(failing), "unresolved")):
                statuses = parser(log)
                gold = {"FAIL_TO_PASS": instance.fail_to_pass, "PASS_TO_PASS": instance.pass_to_pass}
                official = get_resolution_status(get_eval_tests_report(statuses, gold)) == "RESOLVED_FULL"
                assert grade(instance, statuses)[0] == expected == ("resolved" if official else "unresolved"), (
                    instance.instance_id
                )
    assert len(checked) == 55  # 28 on parse_log_pytest, 8 on parse_log_pytest_options, 19 on parse_log_pytest_v2
