"""Issue 37's sockets: no host Unix socket (in a test folder, in /tmp, one only $SSH_AUTH_SOCK names, an abstract one,
Docker's) answers a command unless a config lists it, and sockets that a folder hides, that vanish or come and go
during a run, and the Landlock-scoped thread the commands start from when abstract sockets listen never stop a
command (the escapes as root: test_sandbox_root.py)."""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_git_repo, require_bwrap, unavailable

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.environments.bwrap import ISOLATIONS, argv_head
from llm_ide.environments.processes import LIBC, Spawner, start_with_parent
from llm_ide.environments.sandbox import VANISHED, Sandbox
from llm_ide.environments.scope import LANDLOCK_ABI_SCOPES, landlock_abi
from llm_ide.errors import EnvironmentFailure

LISTEN = textwrap.dedent(
    """
    import socket, sys, time
    server = socket.socket(socket.AF_UNIX)
    server.bind(sys.argv[1].replace("@", "\\0", 1))
    server.listen()
    open(sys.argv[2], "w").close()
    while True:
        server.accept()[0].sendall(b"HOST-SOCKET-ANSWERED")
    """
)


CONNECT = (
    "import socket, sys\n"
    "for address in sys.argv[1:]:\n"
    "    client = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        client.connect(address.replace('@', '\\0', 1)); print(address, client.recv(64).decode())\n"
    "    except OSError as error:\n"
    "        print(address, 'refused', error.errno)\n"
)


@pytest.fixture
def needs_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Listening host sockets: one in a test folder (in /proc/net/unix), one in the temp folder bound in another
    network namespace (as a socket bind-mounted into a container: not in /proc/net/unix, found by the scan), one deep
    in a folder only $SSH_AUTH_SOCK names (another namespace too), an abstract one, and one a config allows."""
    name = uuid.uuid4().hex[:10]
    deep = tmp_path / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    sockets = {
        "listed": str(tmp_path / "docker.sock"),
        "scanned": f"/tmp/vscode-ssh-auth-{name}.sock",
        "agent": str(deep / "agent.sock"),
        "abstract": f"@llm-ide-test-{name}",
        "allowed": str(tmp_path / "postgres.sock"),
    }
    other_namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]
    servers = []
    for key, address in sockets.items():
        ready = tmp_path / f"ready-{key}"
        prefix = other_namespace if key in ("scanned", "agent") else []
        servers.append(subprocess.Popen([*prefix, sys.executable, "-c", LISTEN, address, str(ready)]))
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert servers[-1].poll() is None and time.monotonic() < deadline, f"the {key} socket did not start"
            time.sleep(0.01)
    try:
        yield sockets
    finally:
        for server in servers:
            server.kill()
            server.wait()
        Path(sockets["scanned"]).unlink(missing_ok=True)


@pytest.mark.usefixtures("needs_bwrap")
@pytest.mark.parametrize("network", ["llm-ide", "none"])
def test_no_host_socket_answers_a_command_unless_the_config_lists_it(
    tmp_path: Path, host_sockets: dict[str, str], network: str
) -> None:
    if network != "none" and landlock_abi() < LANDLOCK_ABI_SCOPES:
        unavailable("Landlock cannot scope abstract sockets on this kernel (Linux 6.12 or later)")
    settings = load_config("default", environment={"network": network, "sockets": [host_sockets["allowed"]]})
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = make_environment(settings.environment, repo, "s", None, tmp_path / "tools")
    env.env["SSH_AUTH_SOCK"] = host_sockets["agent"]
    addresses = list(host_sockets.values())
    docker = [path for path in ("/var/run/docker.sock", "/run/containerd/containerd.sock") if os.path.exists(path)]
    result = env.execute(f"python3 -c {shlex.quote(CONNECT)} {' '.join(addresses + docker)}")
    env.close()
    answers = dict(line.split(" ", 1) for line in result.output.splitlines())
    assert answers.pop(host_sockets["allowed"]) == "HOST-SOCKET-ANSWERED"
    assert {address: answer.split()[0] for address, answer in answers.items()} == dict.fromkeys(
        addresses[:-1] + docker, "refused"
    ), result.output


@pytest.mark.usefixtures("needs_bwrap")
def test_a_socket_in_a_folder_the_command_cannot_search_neither_answers_nor_stops_the_command(tmp_path: Path) -> None:
    """A server's socket in its own 0700 folder (PostgreSQL's, another user's): the command cannot reach it, and
    masking it must not fail the command (bwrap could not make the mount point there)."""
    if os.geteuid() != 0:
        pytest.skip("a folder of another user is made by root")
    folder = tmp_path / "pg" / "sockets"
    folder.mkdir(parents=True)
    address, ready = str(folder / ".s.PGSQL.5432"), tmp_path / "ready"
    server = subprocess.Popen([sys.executable, "-c", LISTEN, address, str(ready)])
    try:
        while not ready.exists():
            assert server.poll() is None
            time.sleep(0.01)
        os.chown(folder, 65534, 65534)
        folder.chmod(0o700)
        env = LocalEnvironment(make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}), tools_dir=tmp_path / "tools")
        result = env.execute(f"echo ran; python3 -c {shlex.quote(CONNECT)} {address}")
        env.close()
    finally:
        server.kill()
        server.wait()
    assert result.output.splitlines() == ["ran", f"{address} refused 13"], result.output  # EACCES


@pytest.mark.usefixtures("needs_bwrap")
def test_an_agent_folder_gone_after_the_start_does_not_stop_the_commands(tmp_path: Path) -> None:
    """An ssh-agent's folder in the temp directory is hidden from the start; when its agent ends during the run (the
    folder removed), the next commands still run (bwrap could not mount over a folder that is gone)."""
    agent_folder = Path(tempfile.mkdtemp(prefix="ssh-"))
    (agent_folder / "note").write_text("agent's")
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = make_environment(load_config("default").environment, repo, "s", None, tmp_path / "tools")
    try:
        assert env.execute(f"ls -A {agent_folder}; echo listed").output.split() == ["listed"]
        shutil.rmtree(agent_folder)
        result = env.execute("cat a.py")
        assert (result.returncode, result.output) == (0, "x = 1\n")
    finally:
        env.close()
        shutil.rmtree(agent_folder, ignore_errors=True)


def test_a_masked_socket_gone_before_the_mounts_fails_the_set_up_and_is_left_unmasked_the_next_time(
    tmp_path: Path,
) -> None:
    """bwrap cannot mount over a socket that vanished after the scan (the root is read-only): it says where, the
    command never starts, and the next start leaves that path unmasked while a socket still there stays masked."""
    folder = Path(tempfile.mkdtemp(prefix="vanished-"))
    gone, kept = folder / "gone.sock", folder / "kept.sock"
    try:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(kept))
            server.listen()
            connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{kept}')"
            probe = f"[ -e {gone} ] && echo gone-there; python3 -c {shlex.quote(connect)}"

            def start(unmasked: frozenset[str]) -> subprocess.CompletedProcess[str]:
                sockets = [str(gone), str(kept)]  # and no hidden folder: another test's /tmp/ssh-*, gone, would fail it
                head = argv_head(require_bwrap(), ISOLATIONS[-1], True, [])
                sandbox = Sandbox(head, [tmp_path], [], [], sockets=sockets, unmasked=unmasked)
                argv = sandbox.argv(["bash", "-c", f"echo started; {probe}"], tmp_path)
                return subprocess.run(argv, capture_output=True, text=True, timeout=60)

            failed = start(frozenset())
            assert (failed.returncode, failed.stdout) == (1, "")
            assert VANISHED.findall(failed.stderr) == [str(gone)]
            ran = start(frozenset(VANISHED.findall(failed.stderr)))
            assert ran.stdout == "started\n"  # the vanished path not made, the socket still there refusing
            assert "ConnectionRefusedError" in ran.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.usefixtures("needs_bwrap")
def test_a_command_gets_the_default_signals_while_abstract_sockets_listen(tmp_path: Path) -> None:
    """With an abstract socket listening on the host, a command starts from our Landlock-scoped thread (Linux 6.12
    and later): it ignores the signals any program Python starts ignores (none, or SIGHUP under `nohup`), not SIGPIPE
    or SIGXFSZ, and `yes | head` ends quietly as in any shell."""
    plain = subprocess.run(["grep", "SigIgn", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = LocalEnvironment(repo)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(f"\0llm-ide-test-{uuid.uuid4().hex}")
        server.listen()
        try:
            result = env.execute("grep SigIgn /proc/self/status; yes | head -c 6; echo $?")
        finally:
            env.close()
    assert int(plain.split()[1], 16) & (1 << 12 | 1 << 24) == 0  # SIGPIPE (13) and SIGXFSZ (25): default
    assert (result.returncode, result.output) == (0, f"{plain}y\ny\ny\n0\n")


def test_a_spawner_passes_what_its_thread_holds_to_what_it_starts_and_to_nothing_else() -> None:
    """The thread that starts the commands when abstract sockets listen holds what it was prepared with (there, the
    Landlock scope; here no_new_privs, which /proc shows): what it starts inherits it, this process's other threads
    and what they start do not; a preparation or a start that fails reaches the caller."""

    def no_new_privs() -> None:
        assert LIBC.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS, on this thread only

    def refuse() -> None:
        raise EnvironmentFailure("no scope here")

    spawner, flag = Spawner("test-spawner", no_new_privs), ["grep", "NoNewPrivs", "/proc/self/status"]
    child = start_with_parent(flag, by=spawner.start, stdout=subprocess.PIPE, start_new_session=True)
    assert (child.communicate(timeout=60)[0], child.returncode) == (b"NoNewPrivs:\t1\n", 0)
    assert subprocess.run(flag, capture_output=True, check=True).stdout == b"NoNewPrivs:\t0\n"
    assert Path("/proc/self/status").read_text().count("NoNewPrivs:\t0") == 1
    with pytest.raises(FileNotFoundError):
        spawner.start(lambda: subprocess.Popen(["/nonexistent/program"]))
    with pytest.raises(EnvironmentFailure, match="no scope here"):
        Spawner("test-refused", refuse)


@pytest.mark.usefixtures("needs_bwrap")
def test_host_sockets_coming_and_going_never_stop_a_command(tmp_path: Path) -> None:
    """Another program's sockets made and removed all along (test servers, agents): one masked at the scan and gone
    when bwrap mounts over it fails the sandbox's set-up, never the command, which then starts (once: its trail)."""
    folder, stop = Path(tempfile.mkdtemp(prefix="churn-")), threading.Event()

    def churn() -> None:
        for number in itertools.count():
            if stop.is_set():
                return
            path = folder / f"s{number % 3}.sock"
            with socket.socket(socket.AF_UNIX) as server:
                server.bind(str(path))
                server.listen()
                time.sleep(0.002)  # a socket listening for a moment, then gone: any command may meet it half-way
            path.unlink()

    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = LocalEnvironment(repo, writable=[str(tmp_path)])
    server = threading.Thread(target=churn)
    server.start()
    try:
        results = [env.execute(f"echo {n} >> {tmp_path}/trail; echo ran {n}") for n in range(60)]
    finally:
        stop.set()
        server.join()
        env.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert [(r.returncode, r.output) for r in results] == [(0, f"ran {n}\n") for n in range(60)]
    assert (tmp_path / "trail").read_text().split() == [str(n) for n in range(60)]
