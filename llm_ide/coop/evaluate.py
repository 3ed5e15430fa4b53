"""Grade a pair like CooperBench: test files dropped from the patches, each patch on its own branch from the base,
agent 1 merged into agent 2 (naive, then union on conflict), each feature's tests.patch run on the merged result with
the task's own run_tests.sh (uv, from a warm per-user cache: offline after the first run)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llm_ide.coop.task import CoopError, CoopTask, checkout_base, git

TEST_FILE_MARKS = ("/test_", "/tests/", "_test.py", "/test/", "tests.py")
OUTPUT_TAIL = 4000


class MergeOutcome(BaseModel):
    status: Literal["clean", "conflicts", "missing_input", "error"]
    strategy: Literal["naive", "union"] | None = None
    conflict_files: list[str] = Field(default_factory=list)
    conflict_sections: int = 0
    conflict_lines: int = 0
    diff: str = ""
    error: str | None = None


class TestOutcome(BaseModel):
    feature_id: int
    passed: bool = False
    tests_passed: int = 0
    tests_failed: int = 0
    exit_code: int | None = None
    offline: bool = False
    output: str = ""


class PairEval(BaseModel):
    task: str
    feature1_id: int
    feature2_id: int
    setting: str = "gold"
    k: int = 0
    apply_status: dict[str, str] = Field(default_factory=dict)
    merge: MergeOutcome
    feature1: TestOutcome | None = None
    feature2: TestOutcome | None = None
    both_passed: bool | None = None  # None: the tests were not run
    seconds: dict[str, float] = Field(default_factory=dict)


def drop_test_files(patch: str) -> str:
    """The patch without the sections of test files (CooperBench's rule on `diff --git` headers)."""
    kept, skipping = [], False
    for line in patch.split("\n"):
        if line.startswith("diff --git"):
            skipping = any(mark in line for mark in TEST_FILE_MARKS)
        if not skipping:
            kept.append(line)
    text = "\n".join(kept)
    return text if not text or text.endswith("\n") else text + "\n"


def apply_on_branch(repo: Path, branch: str, patch: str, scratch: Path) -> str:
    git(repo, "checkout", "-q", "-B", branch, "base")
    status = "skipped"
    if patch.strip():
        path = scratch / f"{branch}.patch"
        path.write_text(patch, encoding="utf-8")
        applied = git(repo, "apply", str(path), check=False).returncode == 0
        applied = applied or git(repo, "apply", "--3way", str(path), check=False).returncode == 0
        status = "applied" if applied else "failed"
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"{branch} changes")
    return status


def conflicts(repo: Path) -> tuple[list[str], int, int]:
    """Conflicted files, conflict sections and the lines inside them, read from the markers left in the tree."""
    files = [f for f in git(repo, "diff", "--name-only", "--diff-filter=U").stdout.splitlines() if f]
    sections = lines = 0
    for name in files:
        inside = False
        for line in (repo / name).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("<<<<<<< "):
                sections, inside = sections + 1, True
            elif line.startswith(">>>>>>> "):
                inside = False
            elif inside and not line.startswith("======="):
                lines += 1
    return files, sections, lines


def merge_pair(repo: Path, patch1: str, patch2: str, scratch: Path) -> tuple[MergeOutcome, dict[str, str]]:
    """Agent 1's branch merged into agent 2's (`--no-commit --no-ff`); on conflict the union merge gives the result."""
    status = {"agent1": apply_on_branch(repo, "agent1", patch1, scratch)}
    status["agent2"] = apply_on_branch(repo, "agent2", patch2, scratch)
    naive = git(repo, "merge", "agent1", "--no-commit", "--no-ff", check=False)
    outcome = MergeOutcome(status="clean", strategy="naive")
    if naive.returncode != 0:
        files, sections, lines = conflicts(repo)
        if not files:
            return MergeOutcome(status="error", error=(naive.stderr or naive.stdout).strip()[:500]), status
        outcome = MergeOutcome(
            status="conflicts", strategy="union", conflict_files=files, conflict_sections=sections, conflict_lines=lines
        )
        git(repo, "merge", "--abort")
        attributes = repo / ".git" / "info" / "attributes"
        attributes.parent.mkdir(parents=True, exist_ok=True)
        attributes.write_text("* merge=union\n")
        union = git(repo, "merge", "agent1", "--no-commit", "--no-ff", check=False)
        attributes.unlink()
        if union.returncode != 0:
            git(repo, "merge", "--abort", check=False)
            return outcome.model_copy(update={"status": "error", "error": "the union merge conflicts too"}), status
    if "failed" in status.values():
        outcome = outcome.model_copy(update={"status": "missing_input"})
    git(repo, "commit", "-q", "--allow-empty", "-m", "merged")
    outcome.diff = git(repo, "diff", "base", "HEAD").stdout
    return outcome, status


def uv_cache() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "llm-ide" / "coop-uv"


def uv_binary() -> Path:
    found = shutil.which("uv") or (Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        raise CoopError("the task's run_tests.sh needs uv: pip install 'llm-ide[coop]'")
    return Path(found)


def warm_marker(task: CoopTask) -> Path:
    key = hashlib.sha256(f"{task.name}:{task.base_commit}:{sys.version_info[:2]}".encode()).hexdigest()[:16]
    return uv_cache() / f"warm-{key}"


def parse_counts(output: str) -> tuple[int, int]:
    passed = re.search(r"(\d+) passed", output)
    failed = re.search(r"(\d+) failed", output)
    errors = re.search(r"(\d+) error", output)
    return int(passed.group(1)) if passed else 0, (int(failed.group(1)) if failed else 0) + (
        int(errors.group(1)) if errors else 0
    )


def run_feature_tests(task: CoopTask, feature: int, merged: str, base_repo: Path, scratch: Path) -> TestOutcome:
    """The task's run_tests.sh on a fresh copy of the base with the merged patch and the feature's tests.patch."""
    work = scratch / f"tests-feature{feature}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    repo = work / "repo"
    subprocess.run(["git", "clone", "-q", str(base_repo), str(repo)], check=True, capture_output=True)
    git(repo, "checkout", "-q", "base")
    merged_path = work / "merged.patch"
    merged_path.write_text(merged, encoding="utf-8")
    marker = warm_marker(task)
    offline = marker.exists()
    env = {
        **os.environ,
        "PATH": f"{uv_binary().parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "UV_CACHE_DIR": str(uv_cache()),
        "UV_OFFLINE": "1" if offline else "0",
        "VIRTUAL_ENV": "",
    }
    command = ["bash", str(task.folder / "run_tests.sh"), str(repo), str(task.feature(feature).tests)]
    if merged.strip():
        command.append(str(merged_path))
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work, timeout=1800)
    output = result.stdout + result.stderr
    passed, failed = parse_counts(output)
    ok = result.returncode == 0 and passed > 0
    if ok and not offline:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return TestOutcome(
        feature_id=feature,
        passed=ok,
        tests_passed=passed,
        tests_failed=failed,
        exit_code=result.returncode,
        offline=offline,
        output=output[-OUTPUT_TAIL:],
    )


def evaluate_pair(
    task: CoopTask,
    pair: tuple[int, int],
    patches: tuple[str, str],
    source: Path,
    scratch: Path,
    *,
    setting: str = "gold",
    k: int = 0,
    run_tests: bool = True,
) -> PairEval:
    """Merge the pair's patches and, unless `run_tests` is off, run both features' tests on the merged result."""
    started = time.perf_counter()
    repo = checkout_base(task, source, scratch / "repo")
    for number in pair:
        tests = task.feature(number).tests
        if git(repo, "apply", "--check", str(tests), check=False).returncode != 0:
            raise CoopError(f"{tests}: does not apply to the base commit {task.base_commit}")
    merge, status = merge_pair(repo, drop_test_files(patches[0]), drop_test_files(patches[1]), scratch)
    result = PairEval(
        task=task.name,
        feature1_id=pair[0],
        feature2_id=pair[1],
        setting=setting,
        k=k,
        apply_status=status,
        merge=merge,
        seconds={"merge": round(time.perf_counter() - started, 2)},
    )
    if run_tests and merge.status in ("clean", "conflicts"):
        started = time.perf_counter()
        result.feature1 = run_feature_tests(task, pair[0], merge.diff, repo, scratch)
        result.feature2 = run_feature_tests(task, pair[1], merge.diff, repo, scratch)
        result.both_passed = result.feature1.passed and result.feature2.passed
        result.seconds["tests"] = round(time.perf_counter() - started, 2)
    elif run_tests:
        result.both_passed = False  # no merge to test: neither feature can pass
    return result
