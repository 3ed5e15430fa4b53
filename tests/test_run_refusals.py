"""What `run` and a batch refuse before they start, in one line with exit 2, nothing written: a scripted model
given a folder; a folder that is no repository, has no commit, is inside a git directory or is another user's;
a local run's network, mount point and sandbox paths, docker's network of null, a batch's typo of none; a
limit below zero (0 is none, as the help says). And a config file's relative paths are relative to its folder."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import git, make_git_repo, require_bwrap, require_docker
from first_week_support import DONE, llm_ide, one_line
from in_process import invoke


def test_a_scripted_model_given_a_folder_is_one_line(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "replies").mkdir()
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", "scripted:replies", cwd=tmp_path)
    one_line(result, "scripted model: replies is a directory: give a YAML file of replies")
    assert not (tmp_path / "runs").exists()


def test_a_folder_that_is_no_repository_or_has_no_commit_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.yaml", [act("Write.", "bash", command="echo x > made.txt"), "<submit></submit>"])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    result = llm_ide("run", "--repo", str(plain), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"{plain} is not a git repository: the run's patch is the change against a commit")
    assert result.stderr.rstrip().endswith(f"git -C {plain} add -A && git -C {plain} commit -m base")
    assert sorted(path.name for path in plain.iterdir()) == ["notes.txt"]  # no .git, nothing run, nothing written

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "a.py").write_text("x = 1\n")
    git(fresh, "init", "-q", "-b", "main")
    git(fresh, "add", "a.py")
    before = git(fresh, "status", "--porcelain")
    result = llm_ide("run", "--repo", str(fresh), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"{fresh} has no commit yet: the run's patch is the change against one; make it first")
    assert git(fresh, "status", "--porcelain") == before == "A  a.py\n" and not (fresh / "made.txt").exists()
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("inside", [".git", ".git/refs"])
def test_a_folder_inside_a_git_directory_is_refused_with_the_work_tree_to_give(tmp_path: Path, inside: str) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    before = sorted(path.name for path in (repo / inside).iterdir())
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    result = llm_ide("run", "--repo", str(repo / inside), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(
        result, f"{repo / inside} is inside the git directory {repo / '.git'}, not a work tree: give --repo {repo}"
    )
    assert "init" not in result.stderr  # never the advice to make a repository in there
    assert sorted(path.name for path in (repo / inside).iterdir()) == before and not (tmp_path / "runs").exists()


def test_another_users_repository_that_git_refuses_is_one_line_with_git_s_reason(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a repository to another user")
    tmp_path.chmod(0o755)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"git refuses {repo}: it is another user's repository (git's dubious ownership)")
    assert result.stderr.rstrip().endswith(f"git config --global --add safe.directory {repo}")
    assert "init" not in result.stderr and not (tmp_path / "runs").exists()


HOSTS = "a local run shares the host's network"
LONG = f"/tmp/{'x' * 300}/data"


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"network": "nnone"}, f"environment.network: 'nnone': {HOSTS}"),
        ({"network": None}, f"environment.network: None: {HOSTS}"),
        ({"network": "None"}, f"environment.network: 'None': {HOSTS}"),
        ({"network": "host"}, None),
        ({"mount_at": "relative/x"}, "environment.mount_at: relative/x: a mount point must be an absolute path"),
        ({"mount_at": "/"}, "environment.mount_at: /: a mount point must be an absolute path"),
        ({"mount_at": "/proc/llm-ide-x"}, "environment.mount_at: /proc/llm-ide-x: a mount point must be an absolute"),
        (
            {"mount_at": "/testbed", "sandbox": "none"},
            "environment.mount_at (/testbed) needs bubblewrap, and environment.sandbox is none",
        ),  # fmt: skip
        ({"mount_at": "/testbed"}, None),
        ({"writable": ["~/no-such-cache"]}, "environment.writable: ~/no-such-cache: no such file or folder (make it"),
        ({"writable": ["."]}, None),
        ({"readable": ["~/.pyenv", "/no-such-data"]}, "environment.readable: /no-such-data: no such file or folder"),
        ({"readable": ["~/no-such-toolchain"]}, "environment.readable: ~/no-such-toolchain: no such file or folder"),
        ({"readable": ["~/.pyenv", "~/go/bin", "."]}, None),  # the bundled list's toolchains: shown where there
        ({"readable": [LONG]}, f"environment.readable: {LONG}: cannot be reached (File name too long)"),
        ({"writable": [LONG]}, f"environment.writable: {LONG}: cannot be reached (File name too long)"),
    ],  # a path whose lookup fails (too long; as a user, under another's folder: permission denied) was a traceback
)
def test_a_local_run_s_network_and_mount_point_are_checked_before_it_starts(
    tmp_path: Path, environment: dict[str, str | None], said: str | None
) -> None:
    """Locally `none` cuts the commands off the network and any other value kept it: a typo of none, or null, gave
    them the host's network without a word. A mount point bwrap cannot make, or no bwrap to make it, was said after
    the environment started, in three lines. A writable path not there was left out of the sandbox without a word
    (its commands found it read-only); a readable one too (a typo showed nothing)."""
    if "mount_at" in environment and said is None:
        require_bwrap()  # (a mount point is bubblewrap's)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": {**environment, "tools": []}}))
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", "c.yaml", "-o", "out"]
    (home := tmp_path / "home").mkdir()  # (no toolchain in it)
    result = llm_ide(*args, cwd=tmp_path, env={"HOME": str(home)} if "readable" in environment else None)
    if said is None:
        assert result.returncode == 0 and "submitted" in result.stdout, result.stdout + result.stderr
        return
    one_line(result, said)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", ["file", "stream"])
def test_a_config_file_s_relative_paths_are_relative_to_its_folder(tmp_path: Path, given: str) -> None:
    """`writable: [cache]` in conf/c.yaml was ./cache wherever the command ran (refused there: no such folder), where
    `extends:` in it is relative to conf/; `sockets: [agent.sock]` too (the socket in conf/ was masked). A config read
    from a stream has no folder: its paths are the current folder's, in the copy a resume reads too."""
    require_bwrap()  # (the cache writable: a command writes into it; the socket masked but the one listed)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    environment = {"tools": [], "writable": ["cache"], "readable": ["data"], "sockets": ["agent.sock"]}
    text = yaml.safe_dump({"environment": environment})
    folder = tmp_path / "conf" if given == "file" else tmp_path
    for name in ("cache", "data"):
        (folder / name).mkdir(parents=True)
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "c.yaml").write_text(text)
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect({str(folder / 'agent.sock')!r})"
    command = f"echo hit > {folder}/cache/entry && python3 -c {shlex.quote(connect)} && echo answered"
    steps = [act("Write.", "bash", command=command), reflect(False, "Wrote."), DONE]
    model = write_script(tmp_path / "s.yaml", steps)
    config = ["-c", "conf/c.yaml"] if given == "file" else ["-c", "-"]
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, *config, "-o", "out", "--thread-id", "T"]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "agent.sock"))
        server.listen()
        result = invoke(*args, cwd=tmp_path, input=None if given == "file" else text)
    assert result.returncode == 0 and "submitted" in result.stdout, result.stdout + result.stderr
    assert (folder / "cache" / "entry").read_text() == "hit\n"
    observation = json.loads((tmp_path / "out" / "T.traj.json").read_text())["operations"][0]["observation"]
    assert observation.strip() == "answered", observation
    if given == "stream":
        kept = yaml.safe_load((tmp_path / "out" / "T.config.yaml").read_text())["environment"]
        assert [kept[key] for key in ("writable", "readable", "sockets")] == [
            [str(tmp_path / name)] for name in ("cache", "data", "agent.sock")
        ]


DOCKER_NETWORKS = "a docker run joins a docker network by its name (the default llm-ide, host, yours) or has none"


@pytest.mark.parametrize(
    ("command", "kind", "network", "said"),
    [
        ("run", "docker", None, f"environment.network: None: {DOCKER_NETWORKS}"),
        ("swebench", "docker", None, f"environment.network: None: {DOCKER_NETWORKS}"),
        ("swebench", "local", "nnone", f"environment.network: 'nnone': {HOSTS}"),
    ],
)
def test_a_network_of_null_in_docker_or_a_typo_in_a_batch_is_refused_before_it_starts(
    tmp_path: Path, command: str, kind: str, network: str | None, said: str
) -> None:
    """In docker, null was docker's default bridge (the network, and the host's services, for a user who meant none)
    without a word; a batch never checked the network at all (a typo of none: the host's network)."""
    if kind == "docker":
        require_docker()
    environment = {"network": network, "tools": [], "pull": "never"}  # (a regression pulls nothing, clones nothing)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": environment}))
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    if command == "run":
        args = ["run", "--repo", str(repo), "--task", "t", "--image", "llm-ide-base:bookworm"]
    else:
        row = {"instance_id": "demo__x-1", "repo": str(repo), "base_commit": "0" * 40, "problem_statement": "p"}
        (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
        args = ["swebench", "--subset", "d.jsonl", "--environment", kind]
    result = llm_ide(*args, "--model", model, "--config", "c.yaml", "-o", "out", cwd=tmp_path)
    one_line(result, said)
    assert not (tmp_path / "out" / "demo__x-1").exists()


def test_limits_of_zero_mean_none_and_the_help_says_so(tmp_path: Path) -> None:
    for command, said in [
        ("run", "Maximum number of operations; 0: no limit."),
        ("run", "Maximum model cost in USD; 0: no limit."),
        ("swebench", "Maximum number of operations per instance; 0: no limit."),
        (
            "swebench",
            "Maximum model cost in USD of the whole batch, what its earlier runs in --output spent included; "
            "0: no limit.",
        ),
        ("swebench-single", "Maximum number of operations per instance; 0: no limit."),
        ("swebench-single", "Maximum model cost in USD; 0: no limit."),  # was "Cost limit (USD) of this run."
    ]:
        shown = llm_ide(command, "--help", cwd=tmp_path, env={"COLUMNS": "400"})
        assert shown.returncode == 0 and said in shown.stdout, shown.stdout
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", "m", "--step-limit", "-1", cwd=tmp_path)
    one_line(result, "command line: agent.step_limit: input should be greater than or equal to 0 (got -1)")
