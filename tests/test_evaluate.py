from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from swebench_fixtures import TinyDataset, leftover_containers, tiny_dataset  # noqa: F401 - fixture

from llm_ide.config import load_config
from llm_ide.swebench.dataset import Instance, load_dataset
from llm_ide.swebench.evaluate import (
    EvaluationError,
    changed_files,
    eval_script,
    evaluate_predictions,
    extract_test_output,
    grade,
    load_predictions,
    parse_pytest_log,
)

PYTEST_LOG = """\
+ : '>>>>> Start Test Output'
============================= test session starts ==============================
tests/test_a.py F.s                                                       [100%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
PASSED tests/test_a.py::test_param[a b-c]
FAILED tests/test_a.py::test_bad - AssertionError: assert 1 == 2 - extra
ERROR tests/test_b.py::test_setup - fixture 'db' not found
SKIPPED [1] tests/test_a.py:12: needs network
SKIPPED tests/test_a.py::test_skipped
XFAIL tests/test_a.py::test_known - reason
========================= 1 failed, 2 passed in 0.03s ==========================
+ : '>>>>> End Test Output'
"""


def test_parse_pytest_log_reads_the_summary_lines() -> None:
    assert parse_pytest_log(extract_test_output(PYTEST_LOG)) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_param[a b-c]": "PASSED",
        "tests/test_a.py::test_bad": "FAILED",
        "tests/test_b.py::test_setup": "ERROR",
        "tests/test_a.py::test_skipped": "SKIPPED",
        "tests/test_a.py::test_known - reason": "XFAIL",
    }


def test_missing_markers_mean_the_tests_did_not_run() -> None:
    with pytest.raises(EvaluationError, match="did not run to the end"):
        extract_test_output("+ : '>>>>> Start Test Output'\ncollecting ... Killed\n")


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


def test_fallback_eval_script_restores_tests_and_quotes_node_ids() -> None:
    test_patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\nindex 1..2 100644\n"
        "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1,2 @@\n x\n+y\n"
        "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n"
        "+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+z\n"
    )
    assert changed_files(test_patch) == (["tests/test_a.py"], ["tests/test_new.py"])
    instance = Instance(
        "a__b-1", "p", base_commit="abc123", test_patch=test_patch, fail_to_pass=["tests/test_new.py::t[a b]"]
    )
    script = eval_script(instance, load_config("swebench").swebench)
    lines = script.splitlines()
    assert "git checkout abc123 -- tests/test_a.py " in lines
    assert "rm -f tests/test_new.py" in lines
    assert lines.index(": '>>>>> Start Test Output'") > lines.index("EOF_LLM_IDE_TEST_PATCH")
    assert "python -m pytest -rA -p no:cacheprovider 'tests/test_new.py::t[a b]' " in lines
    assert test_patch.strip() in script
    assert eval_script(Instance("a__b-1", "p", eval_script="echo v5"), {}) == "echo v5"


def test_load_predictions_accepts_mapping_list_and_jsonl(tmp_path: Path) -> None:
    pred = {"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": "diff"}
    (tmp_path / "a.json").write_text(json.dumps({"a__b-1": pred}))
    (tmp_path / "b.json").write_text(json.dumps([pred]))
    (tmp_path / "c.jsonl").write_text(json.dumps(pred) + "\n")
    for name in ("a.json", "b.json", "c.jsonl"):
        assert load_predictions(tmp_path / name) == {"a__b-1": pred}
    (tmp_path / "d.json").write_text(json.dumps([{"model_patch": "x"}]))
    with pytest.raises(EvaluationError, match="instance_id each"):
        load_predictions(tmp_path / "d.json")
    with pytest.raises(EvaluationError, match="not found"):
        load_predictions(tmp_path / "missing.json")


def wrong_patch(gold: str) -> str:
    """Applies cleanly, fixes nothing: the `+ 1` becomes `+ 2`."""
    return gold.replace("\n+    return total(xs) / (len(xs))\n", "\n+    return total(xs) / (len(xs) + 2)\n")


@pytest.mark.docker
@pytest.mark.slow
def test_evaluate_resolved_unresolved_and_errors(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    rows = {row["instance_id"]: row for row in tiny_dataset.rows}
    calc_wrong = wrong_patch(rows["demo__calc-1"]["patch"])
    assert calc_wrong != rows["demo__calc-1"]["patch"]
    preds = {
        "demo__calc-1": calc_wrong,
        "demo__text-1": rows["demo__text-1"]["patch"],
        "demo__shapes-1": rows["demo__shapes-1"]["patch"],
        "demo__nope-1": rows["demo__shapes-1"]["patch"],
    }
    preds_path = tmp_path / "preds.json"
    preds_path.write_text(
        json.dumps({k: {"instance_id": k, "model_name_or_path": "t", "model_patch": v} for k, v in preds.items()})
    )
    result = subprocess.run(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", "evaluate", str(preds_path), "--subset",
         str(tiny_dataset.path), "--workers", "2", "--output", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["resolved_ids"], report["unresolved_ids"], report["error_ids"]) == (
        ["demo__shapes-1", "demo__text-1"],
        ["demo__calc-1"],
        ["demo__nope-1"],
    )
    assert report["resolve_rate"] == 0.5
    calc = report["instances"]["demo__calc-1"]
    assert calc["fail_to_pass"] == {"success": [], "failure": ["tests/test_stats.py::test_mean"]}
    assert calc["pass_to_pass"] == {"success": ["tests/test_stats.py::test_total"], "failure": []}
    assert calc["patch_applied"] is True
    text_f2p = json.loads(rows["demo__text-1"]["FAIL_TO_PASS"])  # a JSON string in the row, like SWE-bench's files
    assert report["instances"]["demo__text-1"]["fail_to_pass"] == {"success": text_f2p, "failure": []}
    assert "resolved 2/4 (50.0%)" in result.stdout
    assert Path(report["instances"]["demo__shapes-1"]["log"]).read_text().count(">>>>> End Test Output") >= 1
    assert leftover_containers(tiny_dataset.client, "eval-") == []


@pytest.mark.docker
@pytest.mark.slow
def test_evaluate_patch_that_does_not_apply_empty_patch_and_missing_image(
    tiny_dataset: TinyDataset,  # noqa: F811
    tmp_path: Path,
) -> None:
    dataset = load_dataset(str(tiny_dataset.path))
    instances = {i.instance_id: i for i in dataset.instances}
    instances["demo__ghost-1"] = Instance("demo__ghost-1", "p", image="llm-ide-test/does-not-exist:never")
    bad_patch = "diff --git a/calc/stats.py b/calc/stats.py\n--- a/calc/stats.py\n+++ b/calc/stats.py\n"
    bad_patch += "@@ -1,1 +1,1 @@\n-nope\n+x\n"
    preds = {
        "demo__calc-1": {"instance_id": "demo__calc-1", "model_patch": bad_patch},
        "demo__text-1": {"instance_id": "demo__text-1", "model_patch": ""},
        "demo__ghost-1": {"instance_id": "demo__ghost-1", "model_patch": "diff --git a/x b/x\n"},
    }
    seen: list[str] = []
    report = evaluate_predictions(
        preds,
        instances,
        settings=load_config("swebench").swebench,
        log_dir=tmp_path / "logs",
        on_result=lambda r: seen.append(r.instance_id),
    )
    by_id = {r.instance_id: r for r in report.results}
    assert sorted(seen) == sorted(preds)
    assert (by_id["demo__calc-1"].status, by_id["demo__calc-1"].patch_applied) == ("error", False)
    assert "patch did not apply" in by_id["demo__calc-1"].detail
    assert (by_id["demo__text-1"].status, by_id["demo__text-1"].detail) == ("unresolved", "empty patch")
    assert by_id["demo__ghost-1"].status == "error"
    assert "llm-ide-test/does-not-exist:never" in by_id["demo__ghost-1"].detail
    assert report.to_json()["resolve_rate"] == 0.0
    assert leftover_containers(tiny_dataset.client, "eval-") == []
