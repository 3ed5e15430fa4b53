"""CooperBench-style pair evaluation: merges (naive, then union), tests on the merged result, task folder errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import git, make_git_repo
from in_process import invoke

from llm_ide.coop.evaluate import drop_test_files, evaluate_pair, merge_pair
from llm_ide.coop.task import CoopError, checkout_base, load_task, parse_pairs

CORE = "def one():\n    return 1\n\n\ndef two():\n    return 2\n"
RUN_TESTS = """#!/bin/bash
set -e
REPO_PATH="$1"; TEST_PATCH="$(realpath "$2")"; FEATURE_PATCH="${3:+$(realpath "$3")}"
cd "$REPO_PATH"
[[ -n "$FEATURE_PATCH" ]] && git apply "$FEATURE_PATCH"
git apply "$TEST_PATCH"
python -m pytest tests -q -p no:cacheprovider 2>&1
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args)


def diff_of(repo: Path, files: dict[str, str]) -> str:
    """The patch that turns the repository's base into `files` (made with git, then undone)."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached")
    git(repo, "reset", "-q", "--hard")
    return patch


def build_task(root: Path) -> tuple[Path, Path]:
    """A task folder in CooperBench's layout and its repository: feature 1 appends to core.py, feature 2 adds a
    module (merges cleanly with 1), feature 3 also appends to core.py (conflicts with 1), feature 4 breaks `one`."""
    repo = make_git_repo(root / "source", {"pkg/__init__.py": "", "pkg/core.py": CORE, "tests/test_core.py": (
        "from pkg.core import one\n\n\ndef test_one():\n    assert one() == 1\n")})  # fmt: skip
    base = git(repo, "rev-parse", "HEAD").strip()
    features = {
        1: ({"pkg/core.py": CORE + "\n\ndef three():\n    return 3\n"}, "three", 3),
        2: ({"pkg/extra.py": "def four():\n    return 4\n"}, "four", 4),
        3: ({"pkg/core.py": CORE + "\n\ndef five():\n    return 5\n"}, "five", 5),
        4: ({"pkg/core.py": CORE.replace("return 1", "return -1")}, "one", 1),
    }
    folder = root / "dataset" / "demo_task" / "task7"
    folder.mkdir(parents=True)
    (folder / "setup.sh").write_text(f'REPO_NAME="demo"\nBASE_COMMIT="{base}"\n')
    (folder / "run_tests.sh").write_text(RUN_TESTS)
    for number, (files, name, value) in features.items():
        sub = folder / f"feature{number}"
        sub.mkdir()
        (sub / "feature.md").write_text(f"Add `{name}`.\n")
        module = "extra" if number == 2 else "core"
        test_file = f"tests/test_feature{number}.py"
        (sub / "feature.patch").write_text(diff_of(repo, {**files, test_file: "# the agent's own test\n"}))
        test = f"from pkg.{module} import {name}\n\n\ndef test_{name}():\n    assert {name}() == {value}\n"
        (sub / "tests.patch").write_text(diff_of(repo, {test_file: test}))
    return folder, repo


@pytest.fixture
def task_and_repo(tmp_path: Path) -> tuple[Path, Path]:
    return build_task(tmp_path)


def test_task_folder_loads_and_pairs_parse(task_and_repo: tuple[Path, Path]) -> None:
    folder, _ = task_and_repo
    task = load_task(folder)
    assert (task.name, sorted(task.features), task.feature(2).description) == (
        "demo_task/task7",
        [1, 2, 3, 4],
        "Add `four`.\n",
    )
    assert parse_pairs(task, "all") == [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
    assert parse_pairs(task, "1,2 3,4") == [(1, 2), (3, 4)]
    with pytest.raises(CoopError, match="no feature9"):
        parse_pairs(task, "1,9")
    with pytest.raises(CoopError, match="bad pair '1,1'"):
        parse_pairs(task, "1,1")
    with pytest.raises(CoopError, match="bad pair '01,1'"):  # the same feature twice, as written otherwise
        parse_pairs(task, "01,1")
    assert parse_pairs(task, "1,2 2,1") == [(1, 2), (2, 1)]  # agent 1 and 2 swapped: another run
    with pytest.raises(CoopError, match=r"^pair 1,2 given twice \(in '1,2 3,4 01,2'\): give each pair once$"):
        parse_pairs(task, "1,2 3,4 01,2")  # was run twice into one folder, counted twice in the summary


@pytest.mark.parametrize(
    ("pair", "status", "sections", "feature1", "feature2"),
    [
        ((1, 2), "clean", 0, True, True),
        ((1, 3), "conflicts", 1, True, True),
        ((2, 4), "clean", 0, False, False),  # feature 4 breaks `one`: the merged result fails both suites
    ],
)
def test_pair_is_merged_and_both_features_tested(
    task_and_repo: tuple[Path, Path], tmp_path: Path, pair: tuple[int, int], status: str, sections: int,
    feature1: bool, feature2: bool,
) -> None:  # fmt: skip
    folder, source = task_and_repo
    task = load_task(folder)
    patches = (task.feature(pair[0]).patch.read_text(), task.feature(pair[1]).patch.read_text())
    result = evaluate_pair(task, pair, patches, source, tmp_path / "scratch")
    assert (result.merge.status, result.merge.conflict_sections) == (status, sections)
    assert result.merge.strategy == ("union" if status == "conflicts" else "naive")
    assert (result.feature1.passed, result.feature2.passed, result.both_passed) == (
        feature1,
        feature2,
        feature1 and feature2,
    )
    assert "tests/test_feature" not in result.merge.diff  # the agents' own test files are dropped before merging
    assert result.apply_status == {"agent1": "applied", "agent2": "applied"}
    if status == "conflicts":
        assert result.merge.conflict_files == ["pkg/core.py"] and result.merge.conflict_lines == 4
        assert "def three():" in result.merge.diff and "def five():" in result.merge.diff
    if not feature2:
        assert (result.feature2.exit_code, result.feature2.tests_failed) != (0, 0)


def test_drop_test_files_keeps_only_source_sections() -> None:
    patch = (
        "diff --git a/pkg/a.py b/pkg/a.py\n+x\n"
        "diff --git a/tests/test_a.py b/tests/test_a.py\n+y\n"
        "diff --git a/pkg/b_test.py b/pkg/b_test.py\n+z\n"
        "diff --git a/pkg/c.py b/pkg/c.py\n+w"
    )
    assert drop_test_files(patch) == "diff --git a/pkg/a.py b/pkg/a.py\n+x\ndiff --git a/pkg/c.py b/pkg/c.py\n+w\n"


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("feature.md", "{folder}/feature2: feature.md is missing"),
        ("tests.patch", "{folder}/feature2/tests.patch: does not apply to the base commit {base}"),
        (
            "base",
            "base commit 0123456789abcdef0123456789abcdef01234567 of demo_task/task7 is not in the repository source",
        ),
        ("gone", "task folder not found: {folder}"),  # it said "not a task folder (expected dataset/…)"
    ],
)
def test_malformed_task_fails_with_one_line(
    task_and_repo: tuple[Path, Path], tmp_path: Path, breakage: str, message: str
) -> None:
    folder, source = task_and_repo
    base = load_task(folder).base_commit
    if breakage == "feature.md":
        (folder / "feature2" / "feature.md").unlink()
    elif breakage == "tests.patch":
        (folder / "feature2" / "tests.patch").write_text(
            "diff --git a/nowhere.py b/nowhere.py\n--- a/nowhere.py\n+++ b/nowhere.py\n@@ -1 +1 @@\n-a\n+b\n"
        )
    elif breakage == "gone":
        shutil.rmtree(folder)
    else:
        (folder / "setup.sh").write_text('BASE_COMMIT="0123456789abcdef0123456789abcdef01234567"\n')
    result = cli(
        "coop",
        "evaluate",
        "--gold",
        str(folder),
        "--pair",
        "1,2",
        "--repo-source",
        str(source),
        "-o",
        str(tmp_path / "o"),
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: " + message.format(folder=folder.resolve(), base=base))
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_gold_merges_match_the_benchmarks_conflict_report(shared_dir: Path, tmp_path: Path) -> None:
    """All 36 reference pairs of the real dirty-equals task: naive-merge conflicts exactly where CooperBench says."""
    root = shared_dir / "data" / "cooperbench"
    task = load_task(root / "dataset" / "samuelcolvin_dirty_equals_task" / "task43")
    expected = {
        (r["f1"], r["f2"]): r["has_conflict"]
        for r in json.loads((root / "gold_conflicts.json").read_text())["all_results"]
    }
    repo = checkout_base(task, root / "repos" / "dirty-equals.bundle", tmp_path / "repo")
    found = {}
    for pair in parse_pairs(task, "all"):
        patches = [drop_test_files(task.feature(n).patch.read_text()) for n in pair]
        merge, status = merge_pair(repo, patches[0], patches[1], tmp_path)
        assert status == {"agent1": "applied", "agent2": "applied"} and merge.status != "error"
        found[pair] = merge.status == "conflicts"
        git(repo, "checkout", "-q", "-f", "base")
    assert found == expected and len(found) == 36


def test_gold_without_tests_says_nothing_of_passing(shared_dir: Path, tmp_path: Path) -> None:
    """--no-tests merges only: `both` is "—", and null in each eval_i_j.json as in summary.json (each said "no")."""
    task = shared_dir / "data" / "cooperbench" / "dataset" / "samuelcolvin_dirty_equals_task" / "task43"
    done = invoke("coop", "evaluate", "--gold", str(task), "--pairs", "1,2 1,3", "--no-tests", "-o", str(tmp_path),
                  env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split("│")[1:-1] for line in done.stdout.splitlines() if line.startswith("│ 1,")]
    assert [[cell.strip() for cell in row][4:7] for row in rows] == [["—", "—", "—"]] * 2  # feature 1, 2, both
    assert [json.loads((tmp_path / f"eval_1_{j}.json").read_text())["both_passed"] for j in (2, 3)] == [None, None]
    assert json.loads((tmp_path / "summary.json").read_text()) == {"pairs": 2, "conflicts": 2, "both_passed": None}
    assert done.stdout.strip().endswith(f"2 pairs: 2 conflict under the naive merge → {tmp_path}")
    told = [line.split(" (")[0] for line in done.stdout.splitlines() if line.startswith("pair 1,")]  # as each ends
    assert told == ["pair 1,2 gold: conflicts, not graded", "pair 1,3 gold: conflicts, not graded"]


@pytest.mark.parametrize(
    ("source", "made"),
    [("nowhere", None), ("a-file", "not a bundle\n"), ("a-folder", ""), ("a-folder/dirty-equals.bundle", None)],
)
def test_gold_with_a_source_git_cannot_read_is_one_line_before_anything(
    shared_dir: Path, tmp_path: Path, source: str, made: str | None
) -> None:
    """`coop evaluate --gold … --repo-source X`: a file that is no bundle was git's lines (five, a blank among them)
    after the output folder was made and the progress shown, and any source git cannot read was said that late."""
    task = shared_dir / "data" / "cooperbench" / "dataset" / "samuelcolvin_dirty_equals_task" / "task43"
    (tmp_path / "a-folder").mkdir()
    if made:
        (tmp_path / source).write_text(made)
    out = tmp_path / "out"
    done = invoke("coop", "evaluate", "--gold", str(task), "--repo-source", source, "--pairs", "1,2", "--no-tests",
                  "-o", str(out), cwd=tmp_path)  # fmt: skip
    said = f"error: --repo-source {source}: neither a git repository nor a bundle\n"
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
    assert not out.exists() and "Traceback" not in done.stderr
