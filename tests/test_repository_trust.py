"""What the sandboxed commands may change in the repository (its `.git` included) is never trusted by llm-ide's own
code outside the sandbox, and the user's home stays hidden whatever $HOME says. Run as root, as CI runs them."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import uuid
from pathlib import Path

import pytest
from agent_script import act, write_script
from conftest import make_git_repo, require_bwrap
from in_process import invoke
from replay_support import INSTANCE, make_repo, mini_trajectory
from test_submodules import patch_after

from llm_ide.attempts.context import git as attempts_git
from llm_ide.attempts.context import uncommitted
from llm_ide.config import load_config
from llm_ide.coop.task import git as coop_git
from llm_ide.environments import make_environment
from llm_ide.environments.local import LocalEnvironment
from llm_ide.workspace.lifecycle import base_commit, baseline_notes
from llm_ide.workspace.patch import extract_patch, keep_base
from llm_ide.workspace.submodules import changed_submodules
from llm_ide.workspace.worktrees import git_worktree


def test_the_users_home_is_hidden_when_home_names_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$HOME set elsewhere (`sudo -E`, a CI container's HOME=/github/home): the home passwd names (root's /root, with
    its ~/.ssh) is hidden as well, and shows the run's own home as ~ does."""
    require_bwrap()
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if not os.access(home, os.W_OK):
        pytest.skip(f"the home passwd names ({home}) is not a folder this user writes to: no secret to plant in it")
    probe = home / f".llm-ide-probe-{uuid.uuid4().hex[:8]}"
    marker = f"home-secret-{uuid.uuid4().hex}"
    probe.write_text(marker)
    probe.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = make_environment(load_config("default").environment, repo, "h", None, tmp_path / "tools")
    try:
        result = env.execute(f"cat {probe}; echo kept > {home}/left; cat {home}/left ~/left; echo done")
    finally:
        env.close()
        probe.unlink()
    assert marker not in result.output and result.output.endswith("kept\nkept\ndone\n"), result.output
    assert not (home / "left").exists()


def plant(mark: Path, path: str) -> str:
    """What a command writes into the repository's `.git` for git outside the sandbox to run (an fsmonitor command,
    hooks, a clean filter `.gitattributes` names), each tried, then `path` changed (stat and content, so git reads it
    again)."""
    touch = f"touch {mark}"
    hook = f"#!/bin/sh\\n{touch}-hook-$(basename $0)\\n"
    hooks = "post-index-change reference-transaction post-checkout pre-auto-gc"
    return (
        f"git config core.fsmonitor '{touch}-fsmonitor; false'; git config filter.x.clean '{touch}-filter; cat';"
        f" printf '* filter=x\\n' > .gitattributes; for h in {hooks}; do printf '{hook}' > .git/hooks/$h"
        f" && chmod +x .git/hooks/$h; done; echo changed >> {path} && touch -d 2001-01-01 {path} && echo planted"
    )


REFUSED = ("could not write config file .git/config", ".git/hooks/post-checkout: Read-only file system")


def ran(mark: Path) -> list[str]:
    return sorted(path.name for path in mark.parent.glob(f"{mark.name}-*"))


def test_what_a_replayed_command_writes_in_git_never_runs_outside_the_sandbox(tmp_path: Path) -> None:
    """`llm-ide replay` looks at the checkout with git after every command: the hooks, fsmonitor command and filter
    a command set up there stay unrun (each one ran as root on the host, once per step)."""
    require_bwrap()
    mark = tmp_path / "ran"
    source = make_repo(tmp_path / "source")
    steps = [("Plant.", plant(mark, "m.py"), 0, "planted\n"), ("Look.", "git status --short; echo looked", 0, "")]
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", steps)
    done = invoke("replay", str(trajectory), "--repo", str(source), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(next((tmp_path / "out" / "run").glob("*.traj.json")).read_text())
    planted, looked = (operation["observation"] for operation in run["operations"][:2])
    assert "planted" in planted and all(refusal in planted for refusal in REFUSED) and "looked" in looked
    assert ran(mark) == []


def test_what_a_reproduction_test_writes_in_git_never_runs_outside_the_sandbox(tmp_path: Path) -> None:
    """A test the agent wrote (reproduction.generate) runs in the sandbox and sets up hooks and an fsmonitor command
    in the repository: neither the next try's file listing nor the next run's start on the repository runs them."""
    require_bwrap()
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = f"import subprocess\nsubprocess.run({plant(mark, 'a.py')!r}, shell=True)\nprint('Issue resolved')\n"
    writes = [
        f"<reproduction>\n```python\n{text}```\n</reproduction>" for text in (script, "print('Issue reproduced')\n")
    ]
    (tmp_path / "R.config.yaml").write_text("environment: {tools: []}\nreproduction: {generate: true}\n")
    (tmp_path / "S.config.yaml").write_text("environment: {tools: []}\n")  # (no tools to build: a minute saved)
    for run_id, replies in (("R", [*writes, act("Done.", "submit")]), ("S", [act("Done.", "submit")])):
        config = ["--config", str(tmp_path / f"{run_id}.config.yaml")]
        model = write_script(tmp_path / f"{run_id}.yaml", replies)
        args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--thread-id", run_id, *config]
        done = invoke(*args, "--output", str(tmp_path / run_id), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert not (repo / ".git" / "hooks" / "post-index-change").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text() and ran(mark) == []


@pytest.mark.parametrize("mount_at", [None, "/testbed"])
def test_the_repositorys_git_config_and_hooks_are_read_only_and_git_work_goes_on(
    tmp_path: Path, mount_at: str | None
) -> None:
    """What would run a program in git outside the sandbox later (the user's own git, llm-ide's next run) cannot be
    written: `.git/config` (filters, fsmonitor, hooksPath, aliases) and `.git/hooks`, made first where a repository
    has none; where the checkout is shown elsewhere (/testbed) too. Branches, stashes and commits are the commands'."""
    require_bwrap()
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})  # (no hooks folder: made --template=)
    assert not (repo / ".git" / "hooks").exists()
    config = (repo / ".git" / "config").read_text()
    work = (
        "git stash -q && git stash pop -q && git checkout -q -b work && git add -A"
        " && git -c user.name=a -c user.email=a@b commit -qm w && git log --format=%s -1"
    )
    with LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools") as environment:
        planted = environment.execute(plant(mark, "a.py")).output
        done = environment.execute(work)
    assert "planted" in planted and all(refusal in planted for refusal in REFUSED), planted
    assert (done.returncode, done.output) == (0, "w\n")
    assert (repo / ".git" / "config").read_text() == config and list((repo / ".git" / "hooks").iterdir()) == []
    git = subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True, text=True)
    assert (git.stdout, ran(mark)) == ("", [])  # (.gitattributes committed: its filter is defined nowhere)


def test_llm_ides_own_worktree_checkout_and_merge_run_none_of_the_repositorys_hooks(tmp_path: Path) -> None:
    """The attempts' worktrees and coop's merges are llm-ide's git on the host: a hook in the repository (put there by
    an unsandboxed command, or the user's own) runs in none of them, and the git work itself is done."""
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    user = ["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@x"]
    subprocess.run([*user, "commit", "-q", "--allow-empty", "-m", "f"], check=True)
    subprocess.run([*user, "branch", "feature"], check=True)
    subprocess.run([*user, "reset", "-q", "--hard", "HEAD~"], check=True)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("post-checkout", "post-merge", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {mark}\n")
        (hooks / name).chmod(0o755)
    added = git_worktree(repo, "add", "--detach", "-f", str(tmp_path / "attempt"), "HEAD")
    attempts_git(repo, "branch", "other")
    coop_git(repo, "merge", "-q", "--ff-only", "feature")
    assert (added.returncode, (tmp_path / "attempt" / "a.py").read_text()) == (0, "x = 1\n")
    assert attempts_git(repo, "log", "--format=%s", "-1") == "f" and not mark.exists()
    subprocess.run([*user, "merge", "-q", "other"], check=True)  # (up to date: no post-merge)
    subprocess.run([*user, "checkout", "-q", "other"], check=True)  # the user's own git runs them
    assert set(mark.read_text().split()) == {"post-checkout", "reference-transaction"}


ALLOW = ["-c", "protocol.file.allow=always", "-c", "user.name=u", "-c", "user.email=u@x"]


def submodule(repo: Path, source: Path, path: str, commit: bool = False) -> None:
    """`source` added to `repo` as the submodule at `path` (and committed)."""
    subprocess.run(["git", "-C", str(repo), *ALLOW, "submodule", "add", "-q", str(source), path], check=True)
    if commit:
        subprocess.run(["git", "-C", str(repo), *ALLOW, "commit", "-qm", path], check=True)


def test_a_submodules_git_config_and_hooks_are_read_only_too_and_its_git_work_goes_on(tmp_path: Path) -> None:
    """`.git/modules/<name>/config` and hooks (a nested submodule's too) were writable: what a command set there ran
    at the user's next `git submodule update` or commit in it, outside the sandbox."""
    require_bwrap()
    mark = tmp_path / "ran"
    inner = make_git_repo(tmp_path / "inner", {"i.py": "i = 1\n"})
    lib = make_git_repo(tmp_path / "lib", {"l.py": "l = 1\n"})
    submodule(lib, inner, "deps/inner", commit=True)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    submodule(repo, lib, "vendor/lib")
    subprocess.run(["git", "-C", str(repo), *ALLOW, "submodule", "update", "-q", "--init", "--recursive"], check=True)
    modules = [repo / ".git" / "modules" / "vendor" / "lib", repo / ".git/modules/vendor/lib/modules/deps/inner"]
    configs = [module / "config" for module in modules]
    before = [config.read_text() for config in configs]
    hook = f"#!/bin/sh\\ntouch {mark}\\n"
    work = "git add -A && git -c user.name=a -c user.email=a@b commit -qm w && git log --format=%s -1"
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools") as environment:
        planted = [
            environment.execute(f"cd {where} && git config core.fsmonitor 'touch {mark}; false'; printf '{hook}' >"
                                f" $(git rev-parse --git-dir)/hooks/post-checkout; echo tried").output
            for where in ("vendor/lib", "vendor/lib/deps/inner")
        ]  # fmt: skip
        done = environment.execute(f"cd vendor/lib && echo 2 >> l.py && {work}")
    for output in planted:
        assert "could not write config file" in output and "Read-only file system" in output, output
    assert (done.returncode, done.output) == (0, "w\n")
    assert [config.read_text() for config in configs] == before
    assert not any((module / "hooks" / "post-checkout").exists() for module in modules)
    subprocess.run(["git", "-C", str(repo / "vendor" / "lib"), "status", "-s"], check=True, capture_output=True)
    assert not mark.exists()


def redirect(mark: Path) -> str:
    """A config of the command's with an fsmonitor command and a clean filter, in a copy of `.git`'s refs and objects
    at `.git/c`, and `.git/commondir` naming it: git reads that config instead of the read-only one."""
    config = f'[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch {mark}-fsmonitor; false"\\n'
    config += f'[filter "x"]\\n\\tclean = "touch {mark}-filter; cat"\\n'
    return (
        f"mkdir .git/c && cp -r .git/objects .git/refs .git/HEAD .git/c/ && printf '{config}' > .git/c/config"
        " && echo c > .git/commondir && printf '* filter=x\\n' > .gitattributes && git config core.fsmonitor"
        " && echo changed >> a.py && echo redirected"
    )


@pytest.mark.parametrize("mount_at", [None, "/testbed"])
def test_no_command_points_git_at_a_config_of_its_own(tmp_path: Path, mount_at: str | None) -> None:
    """Two ways round the read-only `.git/config`: a `commondir` written in `.git` (git reads the config of the folder
    it names), and `.git` renamed away for a new one whose config is the command's. Before, git on the host ran
    either's fsmonitor command. Now the `commondir` is removed once the command ends, and `.git` is a mount point no
    command renames."""
    require_bwrap()
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    replace = f"mv .git .git-old; mkdir -p .git && git init -q && git config core.fsmonitor 'touch {mark}-new; false'"
    with LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools") as environment:
        redirected = environment.execute(redirect(mark)).output
        replaced = environment.execute(replace + "; echo replaced").output
    assert "redirected" in redirected and f"touch {mark}-fsmonitor" in redirected, redirected  # git read it inside
    assert not (repo / ".git" / "commondir").exists()
    assert "Device or resource busy" in replaced and not (repo / ".git-old").exists(), replaced
    git = subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True, text=True)
    assert (git.returncode, ran(mark)) == (0, []), git.stderr


def nested(mark: Path) -> str:
    """A repository made inside the worktree and staged there as a gitlink, whose own config has a clean filter, and a
    file of it changed with its size kept (git must read it, through the filter, to tell)."""
    return (
        "git init -q sub && cd sub && echo a > f && printf '* filter=x\\n' > .gitattributes"
        f" && git config filter.x.clean 'touch {mark}; cat' && git add . && git -c user.name=a -c user.email=a@a"
        " commit -qm s && echo b > f && touch -d 2020-01-01 f && cd .. && git add sub && echo nested"
    )


@pytest.mark.parametrize("mount_at", [None, "/testbed"])
def test_a_repository_a_command_makes_in_the_worktree_runs_nothing_of_its_config_outside(
    tmp_path: Path, mount_at: str | None
) -> None:
    """Git looks into a gitlink's repository (`add -A`, `status`) and runs it under that repository's own config,
    which the command wrote. The patch's staging and the end of a run's check of the submodules ran its clean filter
    on the host, outside the sandbox. Now the staging takes gitlinks as unchanged and the check runs where the
    commands run; the patch and the check say what they said."""
    require_bwrap()
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    settings = load_config("default").patch
    with LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools") as environment:
        base = base_commit(environment)
        assert base is not None
        keep_base(environment, base)
        assert "nested" in environment.execute(nested(mark)).output
        first = extract_patch(environment, base, settings)
        environment.execute("echo c > sub/f && touch -d 2020-01-02 sub/f && echo y = 2 >> a.py")
        second = extract_patch(environment, base, settings)
        changed = changed_submodules(environment)
    with LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools") as environment:
        notes = baseline_notes(environment, base)  # the next run's start in this repository
    assert not mark.exists()
    assert "+Subproject commit " in first and "+y = 2" in second and "+Subproject commit " in second
    assert changed == [
        ("sub", True)
    ]  # new to the index (its filter ran in the sandbox, where it writes nothing outside)
    assert "uncommitted changes (a.py, sub)" in notes[1] and uncommitted(repo) == "a.py, sub"
    assert not mark.exists()


def test_a_nested_repository_the_base_holds_runs_nothing_of_its_config_outside(tmp_path: Path) -> None:
    """A gitlink in the base commit (a nested repository committed as one), whose config a command then gives a clean
    filter: the staging takes it as unchanged from the first snapshot on (the base's gitlinks are looked for when it
    is installed; a staging looks for them only once a base or a staging had one)."""
    require_bwrap()
    mark, identity = tmp_path / "ran", "-c user.name=a -c user.email=a@a"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    setup = "git init -q sub && echo a > sub/f && printf '* filter=x\\n' > sub/.gitattributes && git -C sub add ."
    setup += f" && git {identity} -C sub commit -qm s && git add sub"
    subprocess.run(f"{setup} && git {identity} commit -qm sub", shell=True, cwd=repo, check=True)
    plant = f"cd sub && git config filter.x.clean 'touch {mark}; cat' && echo b > f && touch -d 2020-01-01 f && echo ok"
    patch, output = patch_after(repo, plant)
    assert (patch, mark.exists(), "ok" in output) == ("", False, True)


@pytest.mark.parametrize("layout", ["worktree", "symlink"])
def test_a_git_file_or_a_git_symlink_keeps_the_commands_running_and_git_pointed_where_it_was(
    tmp_path: Path, layout: str
) -> None:
    """`.git` as a file (a linked worktree: the attempts', coop's, the user's) or a symlink to the git directory. The
    file was writable: a command pointed it at a git directory of its own (`gitdir: …`), whose fsmonitor command git
    on the host then ran. With `.git` a symlink, bubblewrap could not mount on it and every command failed."""
    require_bwrap()
    mark = tmp_path / "ran"
    main = make_git_repo(tmp_path / "main", {"a.py": "x = 1\n"})
    if layout == "worktree":
        subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "repo")], check=True)
        repo = tmp_path / "repo"
    else:
        repo, gitdir = main, tmp_path / "gitdir"
        (main / ".git").rename(gitdir)
        (main / ".git").symlink_to(gitdir)
    own = f"git init -q evil && git -C evil config core.fsmonitor 'touch {mark}-fsmonitor; false'"
    point = f"{own}; printf 'gitdir: evil/.git\\n' > .git; git status --short; echo done"
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools") as environment:
        output = environment.execute(point).output
    assert "done" in output and "?? a.py" not in output, output  # git in the sandbox as outside: on the repository
    git = subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True, text=True)
    assert (git.returncode, ran(mark)) == (0, []), git.stderr


def test_a_commondir_written_in_a_submodules_git_directory_is_removed(tmp_path: Path) -> None:
    """`.git/modules/<name>/commondir` pointed git in the submodule at a config of the command's (as `.git/commondir`
    did in the repository's own): the user's next `git status` here, which looks into each submodule, ran its
    fsmonitor command on the host."""
    require_bwrap()
    mark = tmp_path / "ran"
    lib = make_git_repo(tmp_path / "lib", {"l.py": "l = 1\n"})
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    submodule(repo, lib, "vendor/lib", commit=True)
    module = repo / ".git" / "modules" / "vendor" / "lib"
    config = f'[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch {mark}-fsmonitor; false"\\n'
    planted = (
        "cd vendor/lib && d=$(git rev-parse --git-dir) && mkdir $d/c && cp -r $d/objects $d/refs $d/HEAD $d/c/ &&"
        f" printf '{config}' > $d/c/config && echo c > $d/commondir && git config core.fsmonitor && echo redirected"
    )
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools") as environment:
        output = environment.execute(planted).output
    assert "redirected" in output and f"touch {mark}-fsmonitor" in output, output  # git read it inside
    assert not (module / "commondir").exists()
    for where in (repo, repo / "vendor" / "lib"):
        git = subprocess.run(["git", "-C", str(where), "status", "--short"], capture_output=True, text=True)
        assert (git.returncode, ran(mark)) == (0, []), git.stderr


def test_a_worktree_config_git_reads_is_read_only_too(tmp_path: Path) -> None:
    """With `extensions.worktreeConfig` (older `git sparse-checkout init` sets it) git reads `.git/config.worktree`
    as well, which was writable: a command set an fsmonitor command there and the user's next `git status` ran it."""
    require_bwrap()
    mark = tmp_path / "ran"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    subprocess.run(["git", "-C", str(repo), "config", "extensions.worktreeConfig", "true"], check=True)
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools") as environment:
        done = environment.execute(f"git config --worktree core.fsmonitor 'touch {mark}-fsmonitor; false'; echo set")
    assert "set" in done.output and "could not" in done.output, done.output  # (lock or write refused)
    git = subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True, text=True)
    assert (git.returncode, ran(mark)) == (0, []), git.stderr


def test_the_users_own_diff_settings_leave_the_patch_as_git_apply_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patch is `git diff`'s output, and git read the user's config: `diff.noprefix` (a common setting) dropped
    the a/ b/ prefixes, `color.ui=always` coloured it, a diff.external printed something else; `git apply` refused
    it. Now the diff is asked plain."""
    require_bwrap()
    config = tmp_path / "gitconfig"
    config.write_text("[diff]\n\tnoprefix = true\n\texternal = /bin/true\n[color]\n\tui = always\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "run.patch").write_text(patch_after(repo, "echo x = 2 > a.py")[0])
    subprocess.run(["git", "checkout", "-q", "a.py"], cwd=repo, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "run.patch")], cwd=repo, check=True)
    assert (repo / "a.py").read_text() == "x = 2\n"


@pytest.mark.parametrize(
    "setting", ["[diff]\n\tcontext = 0\n", "[diff]\n\tsubmodule = log\n", "[diff]\n\tignoreSubmodules = all\n"]
)
def test_the_users_diff_context_and_submodule_settings_leave_the_patch_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """`diff.context = 0` gave a patch of no context lines (`git apply` refuses it), `diff.submodule = log` a gitlink
    as a "Submodule sub …" line and `diff.ignoreSubmodules = all` none: the gitlink a command staged was lost."""
    require_bwrap()
    (config := tmp_path / "gitconfig").write_text(setting)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\ny = 1\nz = 1\n"})
    nest = "git init -q sub && git -C sub -c user.name=a -c user.email=a@a commit -q --allow-empty -m s && git add sub"
    patch, _ = patch_after(repo, f"sed -i s/y/Y/ a.py && {nest}")
    (tmp_path / "run.patch").write_text(patch)
    subprocess.run(["git", "checkout", "-q", "a.py"], cwd=repo, check=True)
    subprocess.run(["git", "apply", "--check", "--exclude=sub", str(tmp_path / "run.patch")], cwd=repo, check=True)
    assert "\n+Subproject commit " in patch and "\n x = 1\n" in patch, patch
