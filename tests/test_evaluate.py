"""`llm-ide evaluate`'s parts and runs: its folder claimed, the fallback eval script, the predictions it reads, and
evaluations of the tiny dataset's images (resolved, unresolved, errors; stopped mid-test by a signal)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from in_process import invoke
from swebench_fixtures import TinyDataset, leftover_containers, tiny_dataset  # noqa: F401 - fixture

from llm_ide.config import load_config
from llm_ide.swebench.dataset import Instance, load_dataset
from llm_ide.swebench.evaluate import (
    EvaluationError,
    changed_files,
    claim_folder,
    eval_script,
    evaluate_predictions,
    load_predictions,
)


def test_each_evaluation_claims_its_own_folder(tmp_path: Path) -> None:
    first = claim_folder(None, tmp_path / "preds.json")
    second = claim_folder(None, tmp_path / "preds.json")
    other = claim_folder(None, tmp_path / "other.json")
    assert len({first, second, other}) == 3
    assert all(folder.parent == tmp_path / "evaluations" and folder.is_dir() for folder in (first, second, other))
    (first / "logs").mkdir()
    with pytest.raises(EvaluationError, match="already holds an evaluation"):
        claim_folder(first, tmp_path / "preds.json")
    assert claim_folder(tmp_path / "mine", tmp_path / "preds.json") == tmp_path / "mine"


def test_fallback_eval_script_restores_tests_and_quotes_node_ids() -> None:
    test_patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\nindex 1..2 100644\n"
        "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1,2 @@\n x\n+y\n"
        "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n"
        "+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+z\n"
    )
    assert changed_files(test_patch) == (["tests/test_a.py"], ["tests/test_new.py"])
    instance = Instance(
        "a__b-1",
        "p",
        base_commit="abc123",
        test_patch=test_patch,
        fail_to_pass=["tests/test_new.py::t[a", "tests/test_new.py::t[b]"],
        pass_to_pass=["tests/test_a.py::t", "tests/x y.py::t"],
    )
    script = eval_script(instance, load_config("swebench").swebench)
    lines = script.splitlines()
    assert "git checkout abc123 -- tests/test_a.py " in lines
    assert "rm -f tests/test_new.py" in lines
    assert lines.index(": '>>>>> Start Test Output'") > lines.index("EOF_LLM_IDE_TEST_PATCH")
    assert "LLM_IDE_PYTHON=$(command -v python || command -v python3 || echo python)" in lines
    run = '"$LLM_IDE_PYTHON" -m pytest -rA -p no:cacheprovider'
    assert f"{run} tests/test_new.py tests/test_a.py 'tests/x y.py' " in lines  # files: ids may be cut
    assert lines[lines.index(": '>>>>> End Test Output'") - 1] == "SWEBENCH_TEST_EXIT_CODE=$?"
    assert test_patch.strip() in script
    assert eval_script(Instance("a__b-1", "p", eval_script="echo v5"), {}) == "echo v5"


def test_load_predictions_accepts_mapping_list_and_jsonl(tmp_path: Path) -> None:
    pred = {"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": "diff"}
    (tmp_path / "a.json").write_text(json.dumps({"a__b-1": pred}))
    (tmp_path / "b.json").write_text(json.dumps([pred]))
    (tmp_path / "c.jsonl").write_text(json.dumps(pred) + "\n")
    for name in ("a.json", "b.json", "c.jsonl"):
        assert load_predictions(tmp_path / name) == {"a__b-1": pred}
    for content, said in [  # (a prediction without its id said "expected predictions with an instance_id each")
        ([{"model_patch": "x"}], "prediction 1 has no instance_id"),
        ({"a__b-1": pred, "c__d-2": {"model_patch": "x"}}, "prediction 'c__d-2' has no instance_id"),
        ([pred, "diff"], "expected predictions with an instance_id each"),
        ("text", "expected predictions with an instance_id each"),
    ]:
        (tmp_path / "d.json").write_text(json.dumps(content))
        with pytest.raises(EvaluationError, match=f"^{tmp_path / 'd.json'}: {re.escape(said)}"):
            load_predictions(tmp_path / "d.json")
    with pytest.raises(EvaluationError, match="not found"):
        load_predictions(tmp_path / "missing.json")
    for name, empty in [("e.json", "{}"), ("f.json", "[]"), ("g.jsonl", "\n")]:
        (tmp_path / name).write_text(empty)
        with pytest.raises(EvaluationError, match=f"^{tmp_path / name} holds no predictions: nothing to evaluate"):
            load_predictions(tmp_path / name)


@pytest.mark.docker
def test_a_prediction_whose_row_is_malformed_says_so_and_why(tmp_path: Path) -> None:
    """A prediction whose instance's row was malformed was `instance is not in the dataset`, as if the id were not
    there; a malformed row whose id an earlier row loaded under is that row's (its empty patch: no container)."""
    good = {"instance_id": "demo__good-1", "problem_statement": "x", "image": "llm-ide-test/none:never"}
    rows = [good, {**good, "instance_id": "demo__f2p-1", "FAIL_TO_PASS": "[x"}, {**good, "problem_statement": 1}]
    rows.append({**good, "instance_id": "demo__blank-1", "problem_statement": " "})
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    patches = {"demo__good-1": "", "demo__f2p-1": "diff --git a/x b/x\n", "demo__blank-1": "", "demo__gone-1": "d"}
    preds = {
        key: {"instance_id": key, "model_name_or_path": "t", "model_patch": patch} for key, patch in patches.items()
    }
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    args = ["evaluate", str(tmp_path / "preds.json"), "--subset", str(tmp_path / "d.jsonl"), "-o", str(tmp_path / "e")]
    done = invoke(*args, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 1, done.stderr  # nothing graded
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    said = {key: (row["status"], row["detail"]) for key, row in report["instances"].items()}
    assert said == {
        "demo__good-1": ("empty_patch", "empty patch"),
        "demo__f2p-1": (
            "error",
            "instance is malformed in the dataset: row 1 (demo__f2p-1): field FAIL_TO_PASS: "
            "not a JSON list of test names (Expecting value at position 1)",
        ),
        "demo__blank-1": (
            "error",
            "instance is malformed in the dataset: row 3 (demo__blank-1): field "
            "problem_statement: missing or not a non-empty string",
        ),
        "demo__gone-1": ("error", "instance is not in the dataset"),
    }
    assert "malformed row 2 (demo__good-1): field problem_statement: missing" in done.stderr  # warned of, not graded
    assert "demo__f2p-1: error instance is malformed in the dataset: row 1" in done.stdout


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
    args = ["evaluate", str(preds_path), "--subset", str(tiny_dataset.path), "--workers", "2"]
    result = invoke(*args, "--output", str(tmp_path / "eval"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
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
    said = "patch did not apply: error: calc/stats.py: patch does not apply (each attempt in apply.log)"
    assert by_id["demo__calc-1"].detail == said  # git apply's reason (GNU patch is not in the image), not a list
    assert (by_id["demo__text-1"].status, by_id["demo__text-1"].detail) == ("empty_patch", "empty patch")
    assert by_id["demo__ghost-1"].status == "error"
    assert "llm-ide-test/does-not-exist:never" in by_id["demo__ghost-1"].detail
    assert report.to_json()["resolve_rate"] == 0.0
    assert leftover_containers(tiny_dataset.client, "eval-") == []


SLOW_CONFTEST = """diff --git a/conftest.py b/conftest.py
new file mode 100644
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,2 @@
+import os
+os.system("sleep 300")
"""  # the instance's tests start, then wait 300 s in the container: a stop that waited for them would grade them


def sleeping_in_tests(client: Any, container: str) -> bool:
    try:
        rows = client.api.top(container.lstrip("/"))["Processes"] or []
    except Exception:  # not running yet, or gone
        return False
    return any("sleep 300" in " ".join(row) for row in rows)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda how: how.name)
def test_an_evaluation_stopped_mid_test_leaves_no_container_and_ctrl_c_keeps_a_partial_report(
    tiny_dataset: TinyDataset,  # noqa: F811
    tmp_path: Path,
    how: signal.Signals,
) -> None:
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({"demo__calc-1": {"instance_id": "demo__calc-1", "model_patch": SLOW_CONFTEST}}))
    command = [sys.executable, "-m", "llm_ide", "evaluate", str(preds), "--subset", str(tiny_dataset.path)]
    evaluation = subprocess.Popen(
        [*command, "--output", str(tmp_path / "eval")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not any(sleeping_in_tests(tiny_dataset.client, name) for name in leftover_containers_of(evaluation.pid)):
            assert evaluation.poll() is None and time.monotonic() < deadline, "the tests never started"
            time.sleep(0.1)
        evaluation.send_signal(how)
        _, stderr = evaluation.communicate(timeout=60)
    finally:
        evaluation.kill()

    deadline = time.monotonic() + 30  # SIGKILL: the watchdog stops the container, docker removes it
    while leftover_containers(tiny_dataset.client, "eval-demo__calc-1"):
        assert time.monotonic() < deadline, leftover_containers(tiny_dataset.client, "eval-demo__calc-1")
        time.sleep(0.2)
    if how == signal.SIGKILL:
        return
    assert evaluation.returncode == (130 if how == signal.SIGINT else 128 + how), stderr  # SIGTERM: 143, as a run
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert (report["interrupted"], report["total"], report["not_graded"]) == (True, 0, ["demo__calc-1"])
    assert stderr.strip().endswith(
        f"interrupted: 0 of 1 predictions graded, 1 not; partial report: {tmp_path / 'eval' / 'report.json'}"
    )


def leftover_containers_of(pid: int) -> list[str]:
    from conftest import base_image_client

    from llm_ide.environments.docker.cleanup import PID_LABEL

    containers = base_image_client().api.containers(filters={"label": [f"{PID_LABEL}={pid}"]})
    return [c["Names"][0] for c in containers]
