"""A submodule's files are its own repository's: a run's patch cannot hold their changes, and the run says so at its
end rather than dropping them without a word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke

from llm_ide.config import load_config
from llm_ide.environments.local import LocalEnvironment
from llm_ide.workspace.lifecycle import base_commit
from llm_ide.workspace.patch import extract_patch, keep_base

WARNING = "not in the patch (a submodule's files belong to its own repository)"


def with_submodules(tmp_path: Path) -> Path:
    library = make_git_repo(tmp_path / "library", {"lib.py": "v = 1\n"})
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    for folder in ("vendor/one", "vendor/two"):
        add = ["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), folder]
        subprocess.run(add, cwd=repo, check=True, capture_output=True)
    commit = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "submodules"]
    subprocess.run(commit, cwd=repo, check=True, capture_output=True)
    return repo


def made(setting: str) -> str:
    """A repository made in the worktree and staged, with `setting` in its config and a changed file."""
    return (
        "git init -q made && touch made/f && git -C made add f && git -C made -c user.name=t -c user.email=t@t"
        f" commit -qm m && git -C made config {setting} && echo '* filter=x' > made/.gitattributes && echo b > made/f"
        " && git add made"
    )


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("echo 'v = 2' >> vendor/one/lib.py", f"the git submodule vendor/one are {WARNING}"),
        ("touch vendor/one/new.py vendor/two/new.py", f"the git submodules vendor/one, vendor/two are {WARNING}"),
        ("cat vendor/one/lib.py", None),
        (
            "git init -q made && touch made/f && git -C made add f && git -C made -c user.name=t -c user.email=t@t"
            " commit -qm m && git add made",
            "git repositories in the worktree are staged as submodules since the last commit (made): a config a "
            "command wrote there runs",
        ),
        (  # its fsmonitor command hung the check's `git status` (60 s), and the check said nothing
            made("core.fsmonitor 'sleep 1000'"),
            "git repositories in the worktree are staged as submodules since the last commit (made)",
        ),
        pytest.param(  # a clean filter still may: the check says it could not tell
            made("filter.x.clean 'sleep 1000'"),
            "whether files inside git submodules changed (they would not be in the patch) is not known",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_changes_inside_a_submodule_are_said_at_the_end(tmp_path: Path, command: str, said: str | None) -> None:
    repo = with_submodules(tmp_path)
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    steps = [
        act("Change.", "bash", command=f"{command} && echo y >> a.py"),
        reflect(False, "changed"),
        act("Done.", "submit"),
    ]
    model = write_script(tmp_path / "s.yaml", steps)
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = " ".join((done.stdout + done.stderr).split())
    assert (WARNING in shown, said is None or said in shown) == (said is not None and WARNING in said, True), shown
    patch = next((tmp_path / "out").glob("*.patch")).read_text()
    assert patch.startswith("diff --git a/a.py b/a.py") and "vendor" not in patch


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git -C vendor/one checkout -q HEAD~1", "+Subproject commit "),  # its commit changed: in the patch
        ("git rm -q vendor/one", "deleted file mode 160000"),
        ("rm -rf vendor/one", "deleted file mode 160000"),
    ],
)
def test_a_submodules_new_commit_or_removal_is_in_the_patch(tmp_path: Path, command: str, expected: str) -> None:
    """The patch's staging takes the gitlinks as unchanged while `add -A` (git would look inside each), then stages
    their commits alone. Taken as unchanged only, a submodule moved to another commit or removed was missing from the
    patch, and nothing said so."""
    repo = with_submodules(tmp_path)
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]  # (a fresh machine has none)
    newer = ["git", "-C", str(tmp_path / "library"), *identity, "commit", "-q", "--allow-empty", "-m", "2"]
    subprocess.run(newer, check=True)
    pull = "git -c protocol.file.allow=always submodule -q update --remote vendor/one"
    subprocess.run(pull, shell=True, cwd=repo, check=True, capture_output=True)
    commit = ["git", *identity, "commit", "-qam", "newer"]
    subprocess.run(commit, cwd=repo, check=True, capture_output=True)
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools") as environment:
        base = base_commit(environment)
        assert base is not None
        keep_base(environment, base)
        assert extract_patch(environment, base, load_config("default").patch) == ""
        environment.execute(command)
        patch = extract_patch(environment, base, load_config("default").patch)
    assert "diff --git a/vendor/one b/vendor/one" in patch and expected in patch, patch


def test_a_repository_without_a_commit_in_the_worktree_leaves_the_patch_whole(tmp_path: Path) -> None:
    """`git init scratch` by a command (no commit in it): `git add -A` refused the whole worktree ('scratch/' does
    not have a commit checked out) and the patch extraction failed, the run's result lost with it."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    patch, _ = patch_after(repo, "git init -q scratch && touch scratch/f && echo y = 2 >> a.py")
    assert patch.startswith("diff --git a/a.py b/a.py") and "+y = 2" in patch and "scratch" not in patch, patch


def patch_after(repo: Path, command: str) -> tuple[str, str]:
    """The patch after `command` ran in `repo` (its base kept first, tools beside it), and the command's output."""
    with LocalEnvironment(repo, tools_dir=repo.parent / "tools") as environment:
        base = base_commit(environment)
        assert base is not None
        keep_base(environment, base)
        output = environment.execute(command).output
        return extract_patch(environment, base, load_config("default").patch), output
