"""The docker environment's containment (issue 10 §3): default pids and memory limits, a default network that
reaches the internet but not the host's 127.0.0.1 (host networking only when asked), paths refused outside the
workdir, and a patch that survives a deleted `.git`."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, base_image_client, containers_of, git, make_git_repo, remove_containers

from llm_ide.config import load_config
from llm_ide.environments import make_environment
from llm_ide.environments.base import EnvironmentFailure, OutsideRepository
from llm_ide.run.single import run_task
from llm_ide.workspace.patch import extract_patch, keep_base

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = (
    'python3 -c "import socket,sys; s=socket.socket(); s.settimeout(3); '
    "print('reached' if s.connect_ex(('127.0.0.1', int(sys.argv[1]))) == 0 else 'refused')\" {port}"
)


def settings(**values: object):
    return load_config("default", environment={"type": "docker", "image": BASE_IMAGE, "tools": [], **values})


@pytest.fixture
def run_id():
    client = base_image_client()
    run_id = f"test-{uuid.uuid4().hex[:10]}"
    yield run_id
    remove_containers(client, run_id)


@pytest.fixture
def host_service():
    """A TCP service on the host's 127.0.0.1 (like a database or a model server on a developer's machine)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize(("network", "expected"), [(None, "refused"), ("host", "reached")])
def test_the_default_network_cannot_reach_the_hosts_loopback(
    run_id: str, host_service: int, network: str | None, expected: str
) -> None:
    config = settings(**({"network": network} if network else {}))
    with make_environment(config.environment, None, run_id) as env:
        assert env.execute(PROBE.format(port=host_service)).output.strip() == expected
        routes = env.execute("cat /proc/net/route").output.splitlines()[1:]
        assert any(line.split()[1] == "00000000" for line in routes), "no default route: the internet is unreachable"


def test_pids_and_memory_are_limited_by_default(run_id: str) -> None:
    config = settings()
    assert (config.environment.pids_limit, config.environment.memory) == (4096, "8g")
    with make_environment(config.environment.model_copy(update={"pids_limit": 64}), None, run_id) as env:
        result = env.execute("for i in $(seq 100); do sleep 30 & done 2>&1 | tail -n 1; echo spawned", timeout=60)
        assert "Resource temporarily unavailable" in result.output
        host_config = env.client.api.inspect_container(env.container_id)["HostConfig"]
        assert (host_config["PidsLimit"], host_config["Memory"]) == (64, 8 * 1024**3)


def test_paths_outside_the_workdir_are_refused_and_the_patch_survives_a_deleted_git(
    run_id: str, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = settings()
    with make_environment(config.environment, repo, run_id) as env:
        env.execute("ln -s /etc/passwd passwd && ln -s /root escape")
        assert env.read_files(["passwd", "a.py"])["passwd"] is None
        assert not env.inside("passwd") and env.inside("a.py")
        with pytest.raises(OutsideRepository):
            env.write_file("escape/planted.txt", b"x")
        assert env.execute("ls /root/planted.txt").returncode != 0
        base = git(repo, "rev-parse", "HEAD").strip()
        keep_base(env, base)
        env.write_file("a.py", b"x = 2\n")
        env.execute(f"rm -rf .git {env.private_dir('')}")  # even our copy inside the container: the host has the pack
        patch = extract_patch(env, base, config.patch)
        assert "-x = 1\n+x = 2\n" in patch and "passwd" in patch


@pytest.mark.parametrize(
    "command", ["exec >/dev/null 2>&1; sleep 120", "setsid sh -c 'exec >&- 2>&-; sleep 120' & wait"]
)
def test_the_timeout_holds_whatever_the_command_does_with_its_output(run_id: str, command: str) -> None:
    with make_environment(settings().environment, None, run_id) as env:
        result = env.execute(command, timeout=3)
        assert result.timed_out and result.duration < 60
        assert env.execute("echo next").output == "next\n"


CAPABILITIES = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7}
CAPABILITIES |= {"NET_BIND_SERVICE": 10}


def status_of(env) -> dict[str, str]:
    """The command's own /proc/self/status lines that say what it may do, and its user."""
    lines = env.execute("grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; echo uid: $(id -u)").output
    return dict(line.split(":\t") if ":\t" in line else line.split(": ") for line in lines.splitlines())


def test_root_keeps_eight_capabilities_gains_no_privilege_and_has_a_cpu_limit(run_id: str, tmp_path: Path) -> None:
    """Issue 32 §10: containers ran as root with Docker's 14 default capabilities, without no-new-privileges and
    without a CPU limit. Now (an image that declares no user, as SWE-bench's: root) root keeps the 8 capabilities
    ordinary commands need (files of others, processes, ids, low ports), none of MKNOD, NET_RAW, SETFCAP, SETPCAP,
    SYS_CHROOT, AUDIT_WRITE; a setuid program gains nothing; two CPUs by default (at most the engine's)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with make_environment(settings().environment, repo, run_id) as env:
        status = status_of(env)
        kept = sum(1 << bit for bit in CAPABILITIES.values())
        assert (int(status["CapBnd"], 16), int(status["CapEff"], 16)) == (kept, kept)
        assert (status["NoNewPrivs"], status["uid"]) == ("1", "0")
        assert "Operation not permitted" in env.execute("mknod /tmp/null-again c 1 3").output  # MKNOD dropped
        assert env.execute("chown 1234 a.py && git add -A && echo ok").output == "ok\n"  # what root still does
        host = env.client.api.inspect_container(env.container_id)["HostConfig"]
        cpus = min(2.0, float(env.client.info()["NCPU"]))
        added = sorted(name.removeprefix("CAP_") for name in host["CapAdd"])  # the engine may write them CAP_X
        assert (host["CapDrop"], added) == (["ALL"], sorted(CAPABILITIES))
        assert host["SecurityOpt"] == ["no-new-privileges:true"]
        assert host["NanoCpus"] == int(cpus * 1e9)


@pytest.fixture
def user_image() -> Iterator[str]:
    """The base image with a user of its own declared (USER), made for the test and removed after it."""
    client = base_image_client()
    tag = f"llm-ide-test-user:{uuid.uuid4().hex[:10]}"
    dockerfile = f"FROM {BASE_IMAGE}\nRUN useradd -m -u 1500 dev\nUSER dev\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    yield tag
    with contextlib.suppress(docker.errors.APIError):
        client.images.remove(tag, force=True)


@pytest.mark.parametrize(("user", "uid"), [("auto", "1500"), ("1200:1200", "1200")])
def test_the_commands_run_as_the_images_user_or_the_one_set(
    run_id: str, tmp_path: Path, user_image: str, user: str, uid: str
) -> None:
    """A non-root user where the image declares one (`user: auto`), or the one `environment.user` names: the copied
    repository, the tools folder and our own files are theirs; edits, commands and the patch work as for root."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = settings(image=user_image, user=user)
    with make_environment(config.environment, repo, run_id) as env:
        status = status_of(env)
        assert (status["uid"], int(status["CapEff"], 16), status["NoNewPrivs"]) == (uid, 0, "1")
        base = git(repo, "rev-parse", "HEAD").strip()
        keep_base(env, base)
        env.write_file("a.py", b"x = 2\n")
        script = "echo y > b.py && mkdir -p /tools/t && touch /tools/t/x && stat -c %u a.py b.py /tools/t/x"
        assert env.execute(script).output.split() == [uid] * 3
        assert "Permission denied" in env.execute("touch /etc/planted").output
        patch = extract_patch(env, base, config.patch)
        assert "-x = 1\n+x = 2\n" in patch and "+y" in patch


@pytest.mark.parametrize(
    ("user", "reason"),
    [
        ("nosuchuser", "no user nosuchuser in /etc/passwd"),
        ("nosuchuser:root", "no user nosuchuser in /etc/passwd"),
        ("root:nosuchgroup", "no group nosuchgroup in /etc/group"),
    ],
)
def test_a_user_the_image_does_not_know_stops_the_set_up_in_one_line(
    run_id: str, tmp_path: Path, user: str, reason: str
) -> None:
    """The user's ids come from `id` run as them (its output read once attached: it cannot be lost); a user or group
    the image has not is refused with the name it lacks (docker's own reason can end before it is attached), and the
    container goes."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with pytest.raises(EnvironmentFailure) as failure, make_environment(settings(user=user).environment, repo, run_id):
        pass
    assert str(failure.value) == f"environment.user {user}: not a user of this image ({reason})"
    assert containers_of(base_image_client(), run_id) == []


PLANTED = (  # the commands' git config: the container's global one, the repository's; and the files' attributes
    "git config --global core.fsmonitor 'echo fsmonitor >> /tmp/ran; false' && git config --global diff.noprefix true"
    " && git config --global filter.f.clean 'echo filter >> /tmp/ran; cat' && git config --global color.ui always"
    " && printf '#!/bin/sh\\necho external >> /tmp/ran\\n' > /tmp/external && chmod +x /tmp/external"
    " && git config --global diff.external /tmp/external && git config core.fsmonitor 'echo repo >> /tmp/ran; false'"
    " && echo '* filter=f' > .gitattributes && echo 'x = 2' > a.py"
)


def test_the_git_config_a_command_writes_runs_nothing_of_ours_and_leaves_the_patch_as_git_apply_takes_it(
    run_id: str, tmp_path: Path
) -> None:
    """Our own git in the container (the patch's staging and diff) read the container's global config the commands
    wrote: it ran their fsmonitor command, clean filter and diff.external (an empty patch), and wrote a coloured patch
    without a/ b/ prefixes (`git apply` refuses it). Now it reads none of their config."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = settings()
    with make_environment(config.environment, repo, run_id) as env:
        base = git(repo, "rev-parse", "HEAD").strip()
        keep_base(env, base)
        assert env.execute(PLANTED).returncode == 0
        patch = extract_patch(env, base, config.patch, check=True)
        ran = env.execute("cat /tmp/ran").output
    (tmp_path / "run.patch").write_text(patch)
    git(repo, "apply", str(tmp_path / "run.patch"))
    assert ((repo / "a.py").read_text(), (repo / ".gitattributes").read_text()) == ("x = 2\n", "* filter=f\n")
    assert "No such file" in ran


def test_a_git_before_2_32_reads_no_global_config_a_command_wrote(run_id: str, tmp_path: Path) -> None:
    """A git before 2.32 takes no GIT_CONFIG_GLOBAL (unset here, as such a git does): it reads $HOME/.gitconfig and
    $XDG_CONFIG_HOME/git/config. Our own git had XDG_CONFIG_HOME=/, so it read /git/config, which a command as root
    writes (a filter, an fsmonitor command, diff.external there would run at every snapshot)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with make_environment(settings().environment, repo, run_id) as env:
        assert env.execute("mkdir -p /git && git config -f /git/config user.name planted").returncode == 0
        _, read = env.run_trusted("unset GIT_CONFIG_GLOBAL; git config --get user.name || echo none", 60)
    assert read.decode().split() == ["none"]


PRIVATE = "for d in /var/lib/llm-ide/*/base-*.git; do mkdir -p $d/info && {}; done"
WRITTEN = {  # a command writing into our private git directory, then the change the patch should hold anyway
    "a config's fileMode": (
        "printf '[core]\\n\\tfileMode = false\\n' >> $d/config",
        "chmod +x a.py",
        "new mode 100755",
    ),
    "an exclude": ("echo new.py >> $d/info/exclude", "echo y = 1 > new.py", "+y = 1"),
    "a binary attribute": ("echo 'a.py binary' > $d/info/attributes", "echo x = 2 > a.py", "+x = 2"),
    "a clean filter": (
        "echo '* filter=f' > $d/info/attributes && printf '[filter \"f\"]\\n\\tclean = sed s/2/1/\\n' >> $d/config",
        "echo x = 2 > a.py",
        "+x = 2",
    ),
    "a replaced base": (  # by a commit holding the change
        "git push -q $d HEAD:x && git --git-dir=$d replace $(git rev-parse HEAD~ HEAD) && git reset -q HEAD~",
        "echo x = 2 > a.py && git -c user.name=a -c user.email=a@b commit -qam x",
        "+x = 2",
    ),
}


@pytest.mark.parametrize(("private", "change", "expected"), WRITTEN.values(), ids=list(WRITTEN))
def test_what_a_command_writes_into_our_private_git_directory_changes_nothing_in_the_patch(
    run_id: str, tmp_path: Path, private: str, change: str, expected: str
) -> None:
    """The commands run as root in the container, where our git directory of the base commit is: its config, its
    info/exclude and info/attributes, its list of files left out (and a replace ref) they wrote were ours too: an exec
    bit's change, a new file, a file made binary, filtered clean or listed was left out of the patch. Now each staging
    writes them anew, and reads no replace ref."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = settings()
    with make_environment(config.environment, repo, run_id) as env:
        base = git(repo, "rev-parse", "HEAD").strip()
        env.execute("printf '\\0' > bin.dat")  # a binary file: left out
        assert "bin.dat" not in extract_patch(env, base, config.patch)
        result = env.execute(f"{change} && {PRIVATE.format(private)}")
        assert result.returncode == 0, result.output
        assert expected in extract_patch(env, base, config.patch, check=True)


def test_a_commondir_a_command_writes_is_removed_when_it_ends_as_in_a_local_run(run_id: str, tmp_path: Path) -> None:
    """A `.git/commondir` a command wrote (a submodule's too) had git read the config, hooks and refs of the folder it
    names, and the next snapshot found the base commit gone: the run ended `environment_error`. A local run removes
    it when the command ends; now a docker run does too (one the repository had at the start stays)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    for module, commondir in (("sub", None), ("kept", "../..")):
        (folder := repo / ".git" / "modules" / module).mkdir(parents=True)
        (folder / "HEAD").write_text("ref: refs/heads/main\n")
        if commondir:
            (folder / "commondir").write_text(commondir + "\n")
    config = settings()
    with make_environment(config.environment, repo, run_id) as env:
        base = git(repo, "rev-parse", "HEAD").strip()
        keep_base(env, base)
        plant = "git init -q --bare /tmp/c && for d in .git .git/modules/sub; do echo /tmp/c > $d/commondir; done"
        assert env.execute(f"{plant} && echo x = 2 > a.py && git rev-parse --git-common-dir").output == "/tmp/c\n"
        left = env.execute("ls .git/commondir .git/modules/{sub,kept}/commondir 2>&1").output
        patch = extract_patch(env, base, config.patch, check=True)
    assert "-x = 1\n+x = 2\n" in patch
    assert left.splitlines() == [
        "ls: cannot access '.git/commondir': No such file or directory",
        "ls: cannot access '.git/modules/sub/commondir': No such file or directory",
        ".git/modules/kept/commondir",
    ]


@pytest.fixture
def held_repositories_image() -> Iterator[str]:
    """An image declaring a user (dev) and holding two repositories: root's /testbed, dev's /home/dev/repo."""
    client = base_image_client()
    tag = f"llm-ide-test-held:{uuid.uuid4().hex[:10]}"
    commit = "git init -q -b main && echo 'VALUE = 1' > app.py && git add -A && git -c user.name=a -c user.email=a@b"
    dockerfile = (
        f"FROM {BASE_IMAGE}\nRUN useradd -m -u 1500 dev && mkdir /testbed && cd /testbed && {commit} commit -qm base"
        f"\nUSER dev\nRUN mkdir /home/dev/repo && cd /home/dev/repo && {commit} commit -qm base\n"
    )
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    yield tag
    with contextlib.suppress(docker.errors.APIError):
        client.images.remove(tag, force=True)


@pytest.mark.parametrize(
    ("workdir", "status", "error"),
    [
        (
            "/testbed",
            "environment_error",
            "environment.user dev cannot write /testbed/.git (owned by root) in the "
            "repository the image holds: set environment.user to its owner (`user: root`), or make the image's "
            "repository its user's",
        ),
        ("/home/dev/repo", "submitted", None),
    ],
)
def test_a_repository_the_images_user_cannot_write_is_refused_at_the_start_in_one_line(
    run_id: str, tmp_path: Path, held_repositories_image: str, workdir: str, status: str, error: str | None
) -> None:
    """An image declaring a user whose repository is root's: the run's edits and commands were all refused
    (`Permission denied`), and it submitted an empty patch as a success. Now the set-up refuses it in one line
    naming the user and the first path it cannot write; a repository that is the user's runs as before."""
    responses = [act("Change it.", "bash", command="echo 'VALUE = 2' > app.py")]
    responses += [reflect(False, "changed"), act("Done.", "submit")]
    result = run_task(
        "change VALUE",
        model=write_script(tmp_path / "script.yaml", responses),
        settings=settings(workdir=workdir),
        output_dir=tmp_path / "out",
        run_id=run_id,
        repo=None,
        environment="docker",
        image=held_repositories_image,
    )
    info = json.loads(result.trajectory_path.read_text())["info"]
    assert (result.exit_status, info.get("error")) == (status, error)
    assert ("+VALUE = 2" in result.submission) == (status == "submitted")
