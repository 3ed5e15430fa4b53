"""The docker environment's containment (issue 10 §3): default pids and memory limits, a default network that
reaches the internet but not the host's 127.0.0.1 (host networking only when asked), paths refused outside the
workdir, and a patch that survives a deleted `.git`."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, base_image_client, git, make_git_repo

from llm_ide.config import load_config
from llm_ide.environments import OutsideRepository, make_environment
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
    import docker

    for container in client.containers.list(all=True, filters={"label": f"llm-ide.run-id={run_id}"}):
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


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
