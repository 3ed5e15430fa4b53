"""Issue 37: the local sandbox holds as root, as CI, containers and SWE-bench hosts run it. Each escape the issue found
(umount $HOME then read a 0600 file there, remount / read-write then write the host, umount /proc then read
llm-ide's own environment, nsenter into PID 1's namespaces) and its neighbours (unshare, a kernel setting written
through /proc/sys) is tried again in `llm-ide run`, `llm-ide replay` and a reproduction script; the run's output
folder never shows to the commands nor enters the patch; what a SIGKILL leaves is removed by the next start. Run as
root, these are the issue's cases. (The host's sockets: test_sandbox_sockets.py.)"""

from __future__ import annotations

import codecs
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo, require_bwrap
from in_process import invoke
from replay_support import INSTANCE, make_repo, mini_trajectory

from llm_ide.environments import LocalEnvironment
from llm_ide.environments.scratch import OWNED, sweep_temp_folders

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def needs_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def home_probe() -> Iterator[tuple[Path, str]]:
    """A 0600 file in the real home directory (hidden from the commands), and what it holds."""
    marker = f"home-secret-{uuid.uuid4().hex}"
    probe = Path.home() / f".llm-ide-probe-{uuid.uuid4().hex[:8]}"
    probe.write_text(marker)
    probe.chmod(0o600)
    try:
        yield probe, marker
    finally:
        probe.unlink(missing_ok=True)


def escapes(home: Path, probe: Path, host_file: Path, pid: str = "") -> dict[str, str]:
    """Each escape of the issue as one command; the environments read: every process's, and `pid`'s (a process
    holding a secret in its environment, as llm-ide holds its API key), the key's lines rot13'd as the issue's were."""
    environ = f"/proc/[0-9]*/environ {f'/proc/{pid}/environ' if pid else ''}"
    secrets = f"cat {environ} 2>/dev/null | tr '\\0' '\\n' | grep -a -e OPENAI -e sk-test | tr A-Za-z N-ZA-Mn-za-m"
    return {
        "umount-home": f"umount -l {home}; cat {probe}; echo umount-home-done",
        "remount-root": f"mount -o remount,rw /; echo owned > {host_file}; echo remount-root-done",
        "umount-proc": f"umount -l /proc; {secrets}; echo umount-proc-done",
        "nsenter": "nsenter -t 1 -m -p true && echo ENTERED-PID1; nsenter -t 1 -a true && echo ENTERED; echo ns-done",
        "unshare": "unshare -m true && echo UNSHARED-MOUNTS; unshare -Urm true && echo UNSHARED; echo unshare-done",
        "sysctl": "cat /proc/sys/kernel/printk_ratelimit > /proc/sys/kernel/printk_ratelimit && echo SYSCTL-WRITTEN",
        "capabilities": "grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status",
    }


def check_contained(outputs: dict[str, str], marker: str, secret: str, host_file: Path) -> None:
    """Every escape refused: nothing of the home probe, no host write, no secret (as is or rot13'd), no namespace
    entered, no capability."""
    joined = "\n".join(outputs.values())
    assert marker not in joined and "umount-home-done" in outputs["umount-home"]
    assert not host_file.exists() and "remount-root-done" in outputs["remount-root"]
    assert "umount-proc-done" in outputs["umount-proc"] and "***" not in outputs["umount-proc"]  # unread, not masked
    for hidden in (secret, codecs.encode(secret, "rot13"), "BCRANV_NCV_XRL"):  # the key, rot13'd, its name rot13'd
        assert hidden not in joined
    assert "ENTERED" not in outputs["nsenter"] and "ns-done" in outputs["nsenter"]
    assert "UNSHARED" not in outputs["unshare"] and "unshare-done" in outputs["unshare"]
    assert "SYSCTL-WRITTEN" not in outputs["sysctl"] and "Read-only file system" in outputs["sysctl"]
    assert [line.split()[1] for line in outputs["capabilities"].splitlines()] == ["0000000000000000"] * 3


@pytest.mark.usefixtures("needs_bwrap")
def test_no_command_undoes_the_sandbox(tmp_path: Path, home_probe: tuple[Path, str]) -> None:
    """The escapes against a process holding a secret in its environment (/proc/PID/environ, as llm-ide's own)."""
    probe, marker = home_probe
    secret = f"sk-test-{uuid.uuid4().hex}"
    ready = tmp_path / "holder-ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"open({str(ready)!r}, 'w').close(); import time; time.sleep(300)"],
        env={**os.environ, "OPENAI_API_KEY": secret},
    )
    try:
        while not ready.exists():
            assert holder.poll() is None
            time.sleep(0.01)
        env = LocalEnvironment(make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}), tools_dir=tmp_path / "tools")
        commands = escapes(Path.home(), probe, tmp_path / "host-write", str(holder.pid))
        outputs = {name: env.execute(command, timeout=60).output for name, command in commands.items()}
        env.close()
    finally:
        holder.kill()
        holder.wait()
    check_contained(outputs, marker, secret, tmp_path / "host-write")


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A child process: what the commands try to read includes llm-ide's own environment (/proc/<pid>/environ)."""
    environ = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "llm_ide", *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=600
    )


def here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.usefixtures("needs_bwrap")
def test_a_run_and_its_reproduction_script_hold_as_root(tmp_path: Path, home_probe: tuple[Path, str]) -> None:
    """`llm-ide run` (its own API key in its environment) with each escape as a command of the agent, and the same
    escapes in a reproduction script: all refused, the run goes on and submits."""
    probe, marker = home_probe
    secret = f"sk-test-{uuid.uuid4().hex}"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    commands = escapes(Path.home(), probe, tmp_path / "host-write")
    steps = []
    for name, command in commands.items():
        steps += [act(f"Try {name}.", "bash", command=command), reflect(False, f"Tried {name}.")]
    script = "\n".join(f"echo '== {name}'; {command}" for name, command in commands.items()) + "\n"
    (tmp_path / "reproduce.sh").write_text(script)
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", [*steps, act("Done.", "submit")])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    args += ["--output", str(tmp_path / "out"), "--thread-id", "R", "--reproduction", str(tmp_path / "reproduce.sh")]
    done = cli(*args, cwd=tmp_path, env={"OPENAI_API_KEY": secret})
    assert done.returncode == 0, done.stdout + done.stderr
    trajectory = json.loads((tmp_path / "out" / "R.traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "submitted"
    observations = [op["observation"] for op in trajectory["operations"] if op["action_type"] == "bash"]
    check_contained(dict(zip(commands, observations, strict=True)), marker, secret, tmp_path / "host-write")
    before = trajectory["info"]["reproduction"]["scripts"][0]["before"]["output"]
    sections = {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in before.split("== ")[1:]}
    check_contained(sections, marker, secret, tmp_path / "host-write")


@pytest.mark.usefixtures("needs_bwrap")
def test_a_replayed_trajectory_holds_as_root(tmp_path: Path, home_probe: tuple[Path, str]) -> None:
    """A trajectory whose commands are the escapes, replayed (`llm-ide replay`, the repository at /testbed)."""
    probe, marker = home_probe
    secret = f"sk-test-{uuid.uuid4().hex}"
    source = make_repo(tmp_path / "source")
    commands = escapes(Path.home(), probe, tmp_path / "host-write")
    commands["remount-tmp"] = f"mount -o remount,rw /tmp; echo owned > {tmp_path}/tmp-write; echo remount-tmp-done"
    steps = [(f"Try {name}.", command, 0, "") for name, command in commands.items()]
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", steps)
    done = cli("replay", str(trajectory), "--repo", str(source), "--out", str(tmp_path / "out"), cwd=tmp_path,
               env={"OPENAI_API_KEY": secret})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(next((tmp_path / "out" / "run").glob("*.traj.json")).read_text())
    observations = dict(zip(commands, [op["observation"] for op in run["operations"]], strict=False))
    assert "remount-tmp-done" in observations.pop("remount-tmp") and not (tmp_path / "tmp-write").exists()
    check_contained(observations, marker, secret, tmp_path / "host-write")


@pytest.mark.usefixtures("needs_bwrap")
@pytest.mark.parametrize("inside", [True, False])
def test_the_output_folder_never_reaches_the_commands_or_the_patch(tmp_path: Path, inside: bool) -> None:
    """The default output folder (runs/<id>, run from the repository) and one elsewhere: the agent's commands see it
    empty, cannot write the run's log, and nothing of it is in the patch."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    output = repo / "runs" / "O" if inside else tmp_path / "elsewhere" / "O"
    look = f"ls -A {output}; echo listed; echo tampered >> {output}/O.log; cat {output}/O.traj.json; echo looked"
    steps = [act("Look.", "bash", command=look), reflect(False, "Looked.")]
    steps += [
        act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"),
        reflect(False, "Edited."),
        act("Done.", "submit"),
    ]
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", steps)
    args = ["run", "--repo", ".", "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    args += ["--thread-id", "O", *([] if inside else ["--output", str(output)])]
    done = here(*args, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    trajectory = json.loads((output / "O.traj.json").read_text())
    assert trajectory["operations"][0]["observation"].startswith("listed\n")
    assert "looked" in trajectory["operations"][0]["observation"]
    assert "tampered" not in (output / "O.log").read_text().splitlines()  # the command's line names it: no line of it
    patch = (output / "O.patch").read_text()
    assert patch == trajectory["info"]["submission"] and "-x = 1\n+x = 2\n" in patch and "runs/" not in patch


def test_runs_made_in_the_repository_stay_out_of_every_later_patch_and_each_plays_its_script(tmp_path: Path) -> None:
    """Two runs from inside the repository (default output folders runs/a, runs/b), the same script: the second's
    patch holds its edit only (runs/ made ignorable by the first), `git status` shows the edit only, and each run
    plays the script from its start (its place is its own)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"),
                                               reflect(False, "Edited."), act("Done.", "submit")])  # fmt: skip
    args = ["run", "--repo", ".", "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    patches = []
    for thread in ("a", "b"):
        subprocess.run(["git", "checkout", "-q", "."], cwd=repo, check=True)
        done = here(*args, "--thread-id", thread, cwd=repo)
        assert done.returncode == 0, done.stdout + done.stderr
        patches.append((repo / "runs" / thread / f"{thread}.patch").read_text())
        places = list((repo / "runs" / thread).glob(f"{thread}.scripted-s-*.place"))
        assert len(places) == 1 and len(places[0].read_text().splitlines()) == 2
    assert patches[0] == patches[1] and "-x = 1\n+x = 2\n" in patches[1] and "runs/" not in patches[1]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == " M a.py\n" and (repo / "runs" / ".gitignore").read_text().endswith("\n*\n")


def test_the_output_folder_cannot_be_the_repository(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    args = ["run", "--repo", ".", "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    done = here(*args, "--output", ".", "--thread-id", "Q", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the output folder is the repository itself" in done.stdout + done.stderr


def owned_folders(folder: Path, pid: int) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if (m := OWNED.match(p.name)) and int(m["pid"]) == pid)


@pytest.mark.parametrize("what", ["replay", "run"])
def test_what_a_sigkill_leaves_is_removed_by_the_next_start(
    tmp_path: Path, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay killed once its checkout and its run's folders exist, a run killed as its environment starts: the
    next start of any run (in-process, its temp directory the killed one's) removes every folder they left (their
    owner is gone), and no other."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    source = make_repo(tmp_path / "source")
    config = tmp_path / "c.yaml"
    config.write_text("environment: {tools: []}\n")
    if what == "replay":
        trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", [("Look.", "sleep 300", 0, "")])
        args = ["replay", str(trajectory), "--repo", str(source), "--out", str(tmp_path / "out")]
        args += [] if shutil_which_bwrap() else ["--unsandboxed"]
        wanted = {"replay", "tmp", "private", "tools"} if shutil_which_bwrap() else {"replay", "private", "tools"}
    else:
        model = write_script(tmp_path / "s.yaml", [act("Wait.", "bash", command="sleep 300")])
        args = ["run", "--repo", str(source), "--task", "t", "--model", model, "--output", str(tmp_path / "out")]
        args += ["--config", str(config)]
        wanted = {"tools"}  # the kill as the environment starts: its first folder made
    environ = {**os.environ, "TMPDIR": str(temp), "LLM_IDE_TOOLS_CACHE": "off"}
    process = subprocess.Popen([sys.executable, "-m", "llm_ide", *args], cwd=tmp_path, env=environ,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    while not wanted <= {OWNED.match(name)["kind"] for name in owned_folders(temp, process.pid)}:  # type: ignore[index]
        assert process.poll() is None and time.monotonic() < deadline, "the run never made its folders"
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    left = owned_folders(temp, process.pid)
    assert len(left) >= len(wanted)
    stranger = temp / "llm-ide-tmp-not-ours"
    stranger.mkdir()
    model = write_script(tmp_path / "next.yaml", [act("Done.", "submit")])
    later = ["run", "--repo", str(source), "--task", "t", "--model", model, "--output", str(tmp_path / "next")]
    later += ["--config", str(config)]
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads the call's TMPDIR, as a child's would
    done = invoke(*later, cwd=tmp_path, env=environ)
    assert done.returncode == 0, done.stdout + done.stderr
    assert owned_folders(temp, process.pid) == [] and stranger.is_dir()
    assert [p.name for p in temp.iterdir() if p.name != stranger.name and not p.name.startswith("pytest")] == []
    assert sweep_temp_folders(temp) == 0


def shutil_which_bwrap() -> bool:
    from llm_ide.environments.bwrap import bwrap_path

    return bwrap_path() is not None


@pytest.mark.docker
def test_the_output_folder_inside_the_repository_is_not_copied_into_the_container(tmp_path: Path) -> None:
    from conftest import BASE_IMAGE, base_image_client

    base_image_client()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    look = "ls -A /testbed; ls -A /testbed/runs/O; echo looked"
    steps = [act("Look.", "bash", command=look), reflect(False, "Looked."), act("Done.", "submit")]
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", steps)
    args = ["run", "--repo", ".", "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    done = cli(*args, "--thread-id", "O", "--environment", "docker", "--image", BASE_IMAGE, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    observation = json.loads((repo / "runs" / "O" / "O.traj.json").read_text())["operations"][0]["observation"]
    assert observation.split()[:3] == [".git", "a.py", "runs"] and "No such file or directory" in observation
    assert "O.log" not in observation and "looked" in observation
    assert "runs/" not in (repo / "runs" / "O" / "O.patch").read_text()


@pytest.mark.usefixtures("needs_bwrap")
def test_root_on_another_users_repository_runs_the_commands_as_its_owner(tmp_path: Path) -> None:
    """A command without capabilities could not write another user's files: as root on a repository a plain user
    owns (a bind mount, `sudo`), the commands run as that user, without capabilities, and their files are theirs."""
    if os.geteuid() != 0:
        pytest.skip("only root runs commands as another user")
    tmp_path.chmod(0o755)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    try:
        done = env.execute(
            "id -u; echo y = 2 >> a.py && echo edited; touch new.py && stat -c %u new.py;"
            " grep -E '^CapEff:' /proc/self/status; echo scratch > $TMPDIR/s && echo scratch-ok; ls -A ~;"
            " echo mine > ~/kept && echo home-ok"
        )
        again = env.execute("stat -c %u ~/kept; cat ~/kept")
    finally:
        env.close()
    lines = done.output.splitlines()
    assert lines[:4] == ["65534", "edited", "65534", "CapEff:\t0000000000000000"], done.output
    assert "scratch-ok" in lines and lines[-1] == "home-ok" and (repo / "a.py").read_text() == "x = 1\ny = 2\n"
    assert (repo / "new.py").stat().st_uid == 65534
    assert again.output.split() == ["65534", "mine"], again.output  # the home is the run's, and theirs
