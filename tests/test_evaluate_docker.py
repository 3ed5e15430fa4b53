"""`llm-ide evaluate` against a dataset built here: one small git repository (the calc project) in three locally
built images (python3 only; `python` too; no pytest), and the predictions that fooled it before: the gold patch
reversed, and a root conftest.py printing forged `PASSED` lines after a failing run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BASE_IMAGE, base_image_client
from in_process import invoke
from swebench_fixtures import _calc, build_repo, git, instance_row, leftover_containers, v5_eval_script
from swebench_images import build_image, instance_dockerfile, pytest_files, repo_files

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]

FORGED_CONFTEST = """\
import atexit
import os


def pytest_sessionstart(session):
    # after the run, whatever it did: forged summary lines for every test the instance grades
    ids = ["tests/test_stats.py::test_mean", "tests/test_stats.py::test_total"]
    atexit.register(lambda: os.write(1, "".join(f"PASSED {i}\\n" for i in ids).encode()))
"""


ZEROED_EXIT = """

def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
"""


def forged_patch(repo: Path, zero_exit: bool = False) -> str:
    (repo / "conftest.py").write_text(FORGED_CONFTEST + (ZEROED_EXIT if zero_exit else ""))
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    return patch


def reversed_patch(repo: Path, gold: str) -> str:
    """The gold patch turned around (what `git diff` gives from the fixed tree back to the base)."""
    scratch = repo.parent / "reversed"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(repo, scratch)
    subprocess.run(["git", "apply", "-"], cwd=scratch, input=gold, text=True, check=True)
    git(scratch, "add", "-A")
    return git(scratch, "diff", "--cached", "-R", "HEAD")


def fuzzy_patch(gold: str) -> str:
    """The gold patch with a changed context line and no index line: only `patch --fuzz` takes it."""
    assert "\n def mean(xs):\n" in gold
    lines = [line for line in gold.replace("\n def mean(xs):\n", "\n def mean(values):\n").splitlines(True)]
    return "".join(line for line in lines if not line.startswith("index "))


IMAGES = {  # tag suffix → what the image holds besides the repository, git and GNU patch
    "py3": "pytest, python3 only",
    "py": "pytest, python and python3",
    "nopytest": "python3 without pytest",
}


def image_dockerfile(kind: str, base_commit: str) -> str:
    repo = instance_dockerfile(BASE_IMAGE, base_commit).replace(f"FROM {BASE_IMAGE}\n", "")
    lines = [f"FROM {BASE_IMAGE}", "COPY bin/patch /usr/bin/patch", "RUN chmod 755 /usr/bin/patch && patch --version"]
    if kind != "nopytest":
        lines.append("COPY site/ /usr/local/lib/python3.11/dist-packages/")
    if kind == "py":
        lines.append("RUN ln -sf /usr/bin/python3 /usr/local/bin/python")
    else:
        lines.append("RUN ! command -v python")
    return "\n".join(lines) + "\n" + repo


@pytest.fixture(scope="module")
def calc_dataset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_calc_dataset(tmp_path_factory.mktemp("evaldata"), base_image_client())


def build_calc_dataset(root: Path, client: Any) -> dict[str, Any]:
    """Rows of one project under several ids (each id is one prediction case), and their predictions."""
    spec = _calc(1)
    repo, base, gold, test_patch = build_repo(spec, root / "repos")
    files: dict[str, Path | bytes] = {**repo_files(repo), "bin/patch": Path(shutil.which("patch") or "/usr/bin/patch")}
    site = {f"site/{name}": path for name, path in pytest_files().items()}
    images = {
        kind: build_image(
            client, f"llm-ide-test/eval-{kind}:latest", {**files, **(site if kind != "nopytest" else {})},
            image_dockerfile(kind, base), [],
        )
        for kind in IMAGES
    }  # fmt: skip
    unappliable = gold.replace("-    return total(xs) / (len(xs) + 1)  # BUG", "-    return None  # not in the file")
    cases = {  # id → (image, v5 eval_script?, prediction)
        "demo__calc-1": ("py3", False, gold),
        "demo__calc-2": ("py3", False, reversed_patch(repo, gold)),
        "demo__calc-3": ("py3", False, forged_patch(repo)),
        "demo__calc-4": ("py3", False, fuzzy_patch(gold)),
        "demo__calc-5": ("py3", False, ""),
        "demo__calc-6": ("py3", False, unappliable),
        "demo__calc-7": ("nopytest", False, gold),
        "demo__calc-8": ("py", True, forged_patch(repo)),
        "demo__calc-9": ("py", True, reversed_patch(repo, gold)),
        "demo__calc-10": ("py", True, gold),
        "demo__calc-11": ("py3", True, gold),  # the v5 script calls `python`: not on this image
        "demo__calc-12": ("py", True, forged_patch(repo, zero_exit=True)),
    }
    rows = []
    for instance_id, (kind, v5, _) in cases.items():
        row = instance_row(spec, repo, base, gold, test_patch, images[kind]) | {"instance_id": instance_id}
        if v5:
            row["eval_script"] = v5_eval_script(base, test_patch, ["tests/test_stats.py"])
            row["log_parser"] = "parse_log_pytest"
        rows.append(row)
    (root / "dataset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    preds = {i: {"instance_id": i, "model_name_or_path": "t", "model_patch": p} for i, (_, _, p) in cases.items()}
    return {"path": root / "dataset.jsonl", "preds": preds, "client": client, "gold": gold}


def evaluate(dataset: Path, preds: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return invoke("evaluate", str(preds), "--subset", str(dataset), "--workers", "2", *extra)


def test_reversed_forged_fuzzy_empty_unappliable_and_missing_runners(calc_dataset: dict[str, Any], tmp_path: Path):
    preds_path = tmp_path / "preds.json"
    preds_path.write_text(json.dumps(calc_dataset["preds"]))
    result = evaluate(calc_dataset["path"], preds_path)
    assert result.returncode == 0, result.stderr
    (folder,) = (tmp_path / "evaluations").iterdir()
    report = json.loads((folder / "report.json").read_text())
    instances = report["instances"]
    assert {i: r["status"] for i, r in instances.items()} == {
        "demo__calc-1": "resolved",  # python3 stands in for python
        "demo__calc-2": "unresolved",  # the gold patch reversed: not taken backwards
        "demo__calc-3": "unresolved",  # forged PASSED lines after a failing run
        "demo__calc-4": "resolved",  # only GNU patch with fuzz takes it
        "demo__calc-5": "empty_patch",
        "demo__calc-6": "error",
        "demo__calc-7": "error",  # no pytest: not a verdict
        "demo__calc-8": "unresolved",
        "demo__calc-9": "unresolved",
        "demo__calc-10": "resolved",
        "demo__calc-11": "error",  # `python: command not found`
        "demo__calc-12": "unresolved",  # forged lines and a zeroed exit status (the official harness: resolved)
    }
    assert instances["demo__calc-1"]["applied_with"] == "git apply --verbose"
    assert instances["demo__calc-4"]["applied_with"] == "patch --batch --forward --fuzz=5 -p1 -i"
    for reversed_id in ("demo__calc-2", "demo__calc-9"):
        assert instances[reversed_id]["applied_with"] == "already applied (git apply --check --reverse)"
        assert instances[reversed_id]["fail_to_pass"]["failure"] == ["tests/test_stats.py::test_mean"]
    apply_log = (folder / "logs" / "demo__calc-2" / "apply.log").read_text()
    assert "Reversed (or previously applied) patch detected!  Skipping patch." in apply_log
    for forged_id in ("demo__calc-3", "demo__calc-8"):
        forged = instances[forged_id]
        assert (forged["test_exit_code"], forged["applied_with"]) == (1, "git apply --verbose")
        assert "exited with 1" in forged["detail"]
        output = Path(forged["log"]).read_text()
        assert "FAILED tests/test_stats.py::test_mean" in output
        assert output.rindex("PASSED tests/test_stats.py::test_mean") > output.index("FAILED tests/test_stats.py")
    assert "patch did not apply" in instances["demo__calc-6"]["detail"]
    assert instances["demo__calc-6"]["patch_applied"] is False
    assert "No module named pytest" in instances["demo__calc-7"]["detail"]
    assert "not found (exit 127)" in instances["demo__calc-11"]["detail"]
    assert instances["demo__calc-1"]["test_exit_code"] == 0
    assert instances["demo__calc-12"]["test_exit_code"] == 0
    assert "after pytest's final summary" in instances["demo__calc-12"]["detail"]
    assert (report["resolved"], report["unresolved"], report["error"], report["empty_patch"]) == (3, 5, 3, 1)
    assert "resolved 3/12" in result.stdout
    assert leftover_containers(calc_dataset["client"], "eval-") == []


def test_two_prediction_files_in_one_folder_keep_their_own_logs(calc_dataset: dict[str, Any], tmp_path: Path):
    one = {"demo__calc-1": calc_dataset["preds"]["demo__calc-1"]}
    two = {"demo__calc-1": calc_dataset["preds"]["demo__calc-3"] | {"instance_id": "demo__calc-1"}}
    (tmp_path / "a.json").write_text(json.dumps(one))
    (tmp_path / "b.json").write_text(json.dumps(two))
    for name in ("a.json", "b.json"):
        result = evaluate(calc_dataset["path"], tmp_path / name)
        assert result.returncode == 0, result.stderr
    folders = sorted((tmp_path / "evaluations").iterdir())
    assert [f.name.split(".")[0] for f in folders] == ["a", "b"]
    reports = [json.loads((f / "report.json").read_text()) for f in folders]
    assert [r["instances"]["demo__calc-1"]["status"] for r in reports] == ["resolved", "unresolved"]
    assert "conftest.py" not in (folders[0] / "logs" / "demo__calc-1" / "patch.diff").read_text()
    assert "conftest.py" in (folders[1] / "logs" / "demo__calc-1" / "patch.diff").read_text()
    again = evaluate(calc_dataset["path"], tmp_path / "a.json", "--output", str(folders[0]))
    assert again.returncode == 2
    assert "already holds an evaluation" in again.stderr + again.stdout


def test_compare_harness_on_a_repository_without_the_base_commit_is_one_line(shared_dir: Path, tmp_path: Path) -> None:
    """The shared bundles hold each instance's tree on a branch, not its base commit (which the eval script checks
    out): compare_harness said so in a traceback."""
    flask = shared_dir / "data" / "repos" / "pallets__flask.bundle"
    command = [sys.executable, str(ROOT / "scripts" / "compare_harness.py"), "--work", str(tmp_path / "w")]
    command += ["--dataset", str(shared_dir / "data/swebench/SWE-bench_Verified-test.jsonl")]
    done = subprocess.run([*command, "--repo", f"pallets__flask-5014={flask}"], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"pallets__flask-5014: {flask} has no commit 7ee9ceb71e86"), done.stderr
    assert "a clone with the repository's history" in done.stderr


def test_a_timeout_under_a_second_still_ends_the_tests(calc_dataset: dict[str, Any], tmp_path: Path) -> None:
    """`timeout -s KILL 0` (a 0.5 s timeout cut to a whole number) is no timeout at all: the tests ran on."""
    gold = calc_dataset["gold"]
    sleeping = "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
    sleeping += "@@ -0,0 +1,2 @@\n+import time\n+time.sleep(60)\n"
    preds = {"demo__calc-1": {"instance_id": "demo__calc-1", "model_patch": gold + sleeping}}
    (preds_path := tmp_path / "preds.json").write_text(json.dumps(preds))
    result = evaluate(calc_dataset["path"], preds_path, "--timeout", "0.5", "-o", str(tmp_path / "ev"))
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert report["instances"]["demo__calc-1"]["status"] == "error", result.stdout
    assert report["instances"]["demo__calc-1"]["detail"] == "the tests timed out after 1s"
    assert result.returncode == 1, result.stdout + result.stderr
