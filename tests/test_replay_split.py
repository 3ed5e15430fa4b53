"""The split of the shared trajectories the memory is tuned on and judged by (scripts/replay_split.yaml), and the
bench's selection of a part of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from in_process import run_script

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench_replay.py"
ORIGINAL_12 = {  # the trajectories the memory was tuned on before the split
    "pallets__flask-5014",
    "pylint-dev__pylint-6903",
    "pytest-dev__pytest-5631",
    "pytest-dev__pytest-7432",
    *(f"psf__requests-{n}" for n in (1142, 1724, 1766, 1921, 2317, 2931, 5414, 6028)),
}


def repo_of(instance: str) -> str:
    return re.sub(r"-\d+$", "", instance)


def test_the_split_holds_out_a_third_of_every_repository_it_can(shared_dir: Path) -> None:
    split = yaml.safe_load((ROOT / "scripts" / "replay_split.yaml").read_text())
    tune, heldout = set(split["tune"]), set(split["heldout"])
    shared = {
        p.name.removesuffix(".traj.json") for p in (shared_dir / "data/trajectories/mini-swe-agent").glob("*.traj.json")
    }
    assert (len(tune), len(heldout), tune & heldout, tune | heldout) == (24, 12, set(), shared)
    assert tune >= ORIGINAL_12
    for repo in {repo_of(instance) for instance in shared}:
        sessions = {instance for instance in shared if repo_of(instance) == repo}
        if len(sessions - ORIGINAL_12) >= 1 and len(sessions) >= 2:  # requests: all eight were tuned on already
            assert sessions & heldout, repo
            assert len(sessions & heldout) <= -(-len(sessions) // 2), repo


def test_the_bench_replays_the_part_and_the_repositories_asked_for(shared_dir: Path, tmp_path: Path) -> None:
    """With --reports nothing is replayed: an empty folder shows which runs were chosen (each without its report,
    counted as failed, not run: the bench exits 1)."""
    done = run_script(BENCH, "--reports", str(tmp_path), "--set", "heldout", "--repo", "sympy")
    assert done.returncode == 1, done.stderr
    listed = set(re.findall(r"sympy__sympy-\d+", done.stdout))
    assert listed == {"sympy__sympy-17630", "sympy__sympy-22714", "sympy__sympy-24661"}
    assert done.stdout.strip().splitlines()[-1].endswith("runs=0 same_tree=0/0 failed=3")
    assert "0 replays (9 failed or missing) (heldout)" in done.stdout  # 3 sessions × 3 price profiles
    assert f"default@gpt sympy__sympy-17630: no {tmp_path / 'none' / 'replay.json'}" in done.stdout
    both = run_script(BENCH, "--reports", str(tmp_path), "--only", "psf__requests-1766,pallets__flask-5014")
    assert set(re.findall(r"\w+__[\w-]+-\d+", both.stdout)) == {"psf__requests-1766", "pallets__flask-5014"}


def test_a_config_file_that_is_not_there_is_one_line_before_any_replay(tmp_path: Path) -> None:
    """docs/replay.md once named a variant file that had gone (rich.yaml): each of its replays failed in turn, after
    the others had run."""
    gone = tmp_path / "rich.yaml"
    (lean := tmp_path / "lean.yaml").write_text("memory: {}\n")
    done = run_script(BENCH, "--quick", "--out", str(tmp_path / "o"), "--config", str(lean), "--config", str(gone))
    assert (done.returncode, done.stdout) == (1, ""), done.stdout
    assert done.stderr == f"--config: no file {gone}\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "narrowed", [["--repo", "sympi"], ["--only", "psf__requests-1"], ["--repo", "flask", "--set", "heldout"]]
)
def test_a_selection_of_no_trajectory_is_one_line(shared_dir: Path, tmp_path: Path, narrowed: list[str]) -> None:
    """It was a StopIteration traceback from the pooled table."""
    done = run_script(BENCH, "--reports", str(tmp_path), *narrowed)
    assert (done.returncode, done.stdout) == (1, ""), done.stdout
    assert done.stderr.startswith("no trajectory chosen: none of the 36 in ") and done.stderr.count("\n") == 1
    assert done.stderr.endswith("matches --set, --only, --repo and --quick as given\n"), done.stderr
