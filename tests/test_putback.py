"""A command cut by a kill runs again on the worktree put back as the last completed step left it: what the files held
before (the cut command's changes, or the user's own since the kill) is saved in the run's folder first, and said."""

from __future__ import annotations

from pathlib import Path

from durability_support import RERUN, killed_mid_run, killed_run, rerun, trajectory

__all__ = ["killed_mid_run", "killed_run"]  # the killed run, one per worker (durability_support's fixtures)


def test_changes_made_after_a_kill_are_saved_before_the_worktree_is_put_back(
    killed_mid_run: tuple[Path, list[str], bytes],
) -> None:
    tmp_path, args, _ = killed_mid_run
    repo = tmp_path / "repo"
    (repo / "README.md").write_text("demo\nmine, after the kill\n")
    (repo / "mine.txt").write_text("a file of mine\n")
    (repo / "go").touch()
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    assert trajectory(tmp_path)["operations"][1]["observation"].startswith(RERUN)
    assert (repo / "README.md").read_text() == "demo\n" and not (repo / "mine.txt").exists()  # put back
    saved = tmp_path / "out" / "T.put-back-1.patch"
    assert f"is saved in {saved}" in " ".join(output.split()), output
    held = saved.read_text()
    assert "+mine, after the kill" in held and "+++ b/mine.txt\n@@ -0,0 +1 @@\n+a file of mine" in held
    assert "+one" in held  # the whole worktree against the base commit: `git apply` it there


def test_nothing_is_saved_when_the_worktree_is_as_the_last_step_left_it(
    killed_mid_run: tuple[Path, list[str], bytes],
) -> None:
    tmp_path, args, _ = killed_mid_run
    repo = tmp_path / "repo"
    (repo / "go").touch()
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    assert "is saved in" not in output and not list((tmp_path / "out").glob("*.put-back*")), output
