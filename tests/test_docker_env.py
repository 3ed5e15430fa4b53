from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, base_image_client, containers_of, git, make_git_repo, remove_containers
from in_process import invoke

from llm_ide.config import load_config
from llm_ide.environments import make_environment
from llm_ide.environments.base import EnvironmentFailure, FileSnapshot
from llm_ide.environments.docker.images import DEFAULT_NETWORK, ensure_network

pytestmark = pytest.mark.docker

CONDA_IMAGE = "llm-ide-test-conda:bookworm"
REPO_ROOT = Path(__file__).resolve().parents[1]


def settings(**values: object) -> dict:
    return load_config("default", environment={"type": "docker", "image": BASE_IMAGE, **values}).environment


def wait_until_gone(client, run_id: str, seconds: float = 15) -> list:
    end = time.monotonic() + seconds
    while (left := containers_of(client, run_id)) and time.monotonic() < end:
        time.sleep(0.2)
    return left


def wait_running(client, run_id: str, command: str, process: subprocess.Popen) -> None:
    """Until `command` runs in the run's container (what a signal test waits for before it signals)."""
    end = time.monotonic() + 120
    while not any(
        command in row[-1]
        for c in containers_of(client, run_id)
        if c.status == "running"  # top() fails on a container still being created
        for row in c.top()["Processes"]
    ):
        assert time.monotonic() < end and process.poll() is None, "the run did not reach its command"
        time.sleep(0.2)


@pytest.fixture
def client():
    return base_image_client()


@pytest.fixture
def run_id(client):
    """A fresh run id; whatever a failing test leaves behind under it is removed afterwards."""
    run_id = f"test-{uuid.uuid4().hex[:10]}"
    yield run_id
    remove_containers(client, run_id)


def test_commands_workdir_env_and_container_settings(client, run_id: str) -> None:
    config = settings(workdir="/work/project", env={"PAGER": "cat", "MY_SETTING": "a b"}, cpus=1.5, memory="256m")
    env = make_environment(config, None, run_id, None, None)
    try:
        result = env.execute('pwd; echo "$PAGER|$MY_SETTING"; echo err >&2; exit 4')
        assert (result.output, result.returncode, result.timed_out) == ("/work/project\ncat|a b\nerr\n", 4, False)
        env.execute("mkdir -p sub && echo hi > sub/f")
        assert env.execute("pwd; cat f", cwd="sub").output == "/work/project/sub\nhi\n"
        assert env.execute("cd /nope").returncode == 1
        assert env.execute("read line; echo got:$line").output == "got:\n"
        with pytest.raises(ValueError, match="embedded null byte"):
            env.execute("echo a\0b")
        assert env.execute("printf 'caf\\xc3\\xa9 \\xff\\n'").output == "café \ufffd\n"
        assert (env.workdir, env.tools_root) == ("/work/project", "/tools")
        [container] = containers_of(client, run_id)
        assert container.labels["llm-ide"] == "1" and container.labels["llm-ide.pid"] == str(os.getpid())
        host_config = container.attrs["HostConfig"]
        assert (host_config["NanoCpus"], host_config["Memory"]) == (1_500_000_000, 256 * 1024 * 1024)
        assert host_config["NetworkMode"] == "llm-ide" and container.attrs["Config"]["Entrypoint"][-1] == "llm-ide-init"
        orphans = (  # three orphans (their parent gone at once), waited for until none runs, then the zombies counted
            "t=0.051; for i in 1 2 3; do (sleep $t &) ; done;"  # once PID 1 has had up to 10 s to reap them
            ' while ps -eo stat=,args= | grep -q "^[^Z][^ ]* *sleep $t$"; do :; done;'
            ' for i in $(seq 200); do ps -eo stat= | grep -q "^Z" || break; sleep 0.05; done;'
            ' ps -eo stat= | grep -c "^Z"'
        )
        assert env.execute(orphans).output.strip() == "0"  # our PID 1 reaps them
        assert host_config["PidsLimit"] == 4096
        ca = Path("/etc/ssl/certs/ca-certificates.crt")
        if ca.is_file():
            assert env.execute(f"cat {ca}").output == ca.read_text()
            assert env.execute(f"touch {ca}").returncode != 0, "the CA bundle must be mounted read-only"
            assert env.read_files([str(ca)]) == {str(ca): None}, "a file outside the workdir is never read"
    finally:
        env.close()
    assert containers_of(client, run_id) == []


def test_repo_is_copied_with_git_and_the_host_copy_stays_untouched(client, run_id: str, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"pkg/mod.py": "x = 1\n", "run.sh": "echo run\n", "README": "r\n"})
    (repo / "run.sh").chmod(0o755)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "make run.sh executable")
    env = make_environment(settings(), repo, run_id, BASE_IMAGE, None)
    try:
        assert env.execute("git status --porcelain && git log --format=%s").output == "make run.sh executable\nbase\n"
        assert env.execute("stat -c '%U %a' pkg/mod.py run.sh").output == "root 644\nroot 755\n"
        env.write_file("pkg/mod.py", b"x = 2\n")
        env.write_file("run.sh", b"echo changed\n")
        env.write_file("new/deep/data.bin", b"\x00\xffbin")
        assert env.execute("./run.sh && git status --porcelain").output == (
            "changed\n M pkg/mod.py\n M run.sh\n?? new/\n"
        )
        mtimes = env.execute(
            "python3 -c 'import os,sys; print(*(os.stat(p).st_mtime_ns for p in sys.argv[1:]))' "
            "pkg/mod.py new/deep/data.bin README"
        ).output.split()
        snapshots = env.read_files(["pkg/mod.py", "new/deep/data.bin", "README", "missing.py", "pkg", "./README"])
        assert snapshots == {
            "pkg/mod.py": FileSnapshot(b"x = 2\n", int(mtimes[0])),
            "new/deep/data.bin": FileSnapshot(b"\x00\xffbin", int(mtimes[1])),
            "README": FileSnapshot(b"r\n", int(mtimes[2])),
            "missing.py": None,
            "pkg": None,
            "./README": FileSnapshot(b"r\n", int(mtimes[2])),
        }
        assert env.read_files([]) == {}
    finally:
        env.close()
    assert (repo / "pkg/mod.py").read_text() == "x = 1\n" and not (repo / "new").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_copy_in_a_directory_and_a_file(client, run_id: str, tmp_path: Path) -> None:
    source = tmp_path / "tool"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("VERSION = 3\n")
    (source / "setup.cfg").write_text("[metadata]\n")
    with make_environment(settings(), None, run_id, None, None) as env:
        env.copy_in(source, "/tools/mytool")
        env.copy_in(source / "setup.cfg", "conf/setup.cfg")
        assert env.execute("cd /tools/mytool && python3 -B -c 'import pkg; print(pkg.VERSION)'").output == "3\n"
        assert env.execute("find /tools -type f | sort; cat conf/setup.cfg").output == (
            "/tools/mytool/pkg/__init__.py\n/tools/mytool/setup.cfg\n[metadata]\n"
        )


def test_timeout_kills_the_command_inside_the_container(client, run_id: str) -> None:
    with make_environment(settings(), None, run_id, None, None) as env:
        result = env.execute("echo started; sleep 301 & sleep 302; echo never", timeout=1.5)
        assert result.timed_out is True and result.returncode == 137
        assert result.output.startswith("started\n") and "never" not in result.output
        assert "timed out after 1.5 s" in result.output
        processes = env.execute("ps -eo stat,args").output
        assert "sleep 30" not in processes, processes
        assert env.execute("echo next").output == "next\n"


def test_a_stopped_timeout_is_killed_from_outside(client, run_id: str) -> None:
    with make_environment(settings(), None, run_id, None, None) as env:
        env.kill_grace = 1.0
        result = env.execute("echo a; kill -STOP $PPID; sleep 303", timeout=1)
        assert (result.timed_out, result.returncode) == (True, 137) and result.output.startswith("a\n")
        assert "sleep 303" not in env.execute("ps -eo args").output
        assert env.execute("echo fine").output == "fine\n"


def test_a_killed_session_is_replaced(client, run_id: str) -> None:
    with make_environment(settings(), None, run_id, None, None) as env:
        env.execute("echo keep > /tmp/state")
        lost = env.execute("pkill -KILL -f llm-ide-session; sleep 5")
        assert "shell session in the container ended" in lost.output and lost.timed_out is False
        assert env.execute("cat /tmp/state").output == "keep\n"


def test_100mb_of_output_is_capped_in_bounded_memory(client, run_id: str) -> None:
    config = settings(output_max_bytes=10_000)
    with make_environment(config, None, run_id, None, None) as env:
        tracemalloc.start()
        try:
            result = env.execute("echo BEGIN; yes 0123456789 | head -c 100000000; echo; echo END")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 5_000_000, f"peak Python allocation {peak} bytes while streaming 100 MB"
        assert result.truncated is True and result.returncode == 0
        assert result.output.startswith("BEGIN\n0123456789\n") and result.output.endswith("\nEND\n")
        assert f"({6 + 100_000_000 + 5} bytes in total)" in result.output
        assert env.execute("echo small").output == "small\n"


def test_container_removed_after_an_exception(client, run_id: str) -> None:
    with pytest.raises(RuntimeError, match="boom"), make_environment(settings(), None, run_id, None, None) as env:
        assert len(containers_of(client, run_id)) == 1
        env.execute("true")
        raise RuntimeError("boom")
    assert containers_of(client, run_id) == []
    with pytest.raises(EnvironmentFailure, match="closed"):
        env.execute("true")


@pytest.mark.parametrize(
    ("signum", "expected_returncode"),
    [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)],
)
def test_container_removed_when_the_process_is_interrupted(client, run_id: str, signum: int, expected_returncode: int):
    script = textwrap.dedent(
        f"""
        from llm_ide.config import load_config
        from llm_ide.environments import make_environment
        config = load_config("default", environment=dict(type="docker", image={BASE_IMAGE!r}))
        env = make_environment(config.environment, None, {run_id!r}, None, None)
        print("running", flush=True)
        env.execute("sleep 300")
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "running\n", process.stderr
    assert len(containers_of(client, run_id)) == 1
    wait_running(client, run_id, "sleep 300", process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == expected_returncode, stderr
    assert wait_until_gone(client, run_id) == []


def test_cleanup_sweeps_only_this_users_leftovers_on_this_host_and_says_which(client, run_id: str) -> None:
    from llm_ide.environments.docker import owner_labels

    # a pid no process has (2**22 + 7), no owner label (made before it): judged by its PID, as `cleanup` does; a
    # docker run's start takes another run's container only by that label (none starting meanwhile removes these)
    dead_labels = {k: v for k, v in owner_labels(run_id).items() if k != "llm-ide.owner"} | {"llm-ide.pid": "4194311"}
    others = [
        {**dead_labels, "llm-ide.user": "someone-else"},  # another user's run on the same engine
        {**dead_labels, "llm-ide.host": "another-host"},  # another host's run on a shared engine
        {key: value for key, value in dead_labels.items() if key != "llm-ide.user"},  # made before the user label
    ]
    ours = [client.containers.run(BASE_IMAGE, ["sleep", "infinity"], labels=dead_labels, detach=True) for _ in "ab"]
    live = client.containers.create(BASE_IMAGE, ["sleep", "infinity"], labels=owner_labels(run_id))
    for labels in others:
        client.containers.create(BASE_IMAGE, ["sleep", "infinity"], labels=labels)

    def cleanup(*args: str) -> list[str]:
        result = invoke("cleanup", "--run-id", run_id, *args, cwd=REPO_ROOT)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    names = sorted(container.name for container in ours)
    listed = [f"would remove {name} (run {run_id}, running)" for name in names]
    assert sorted(cleanup("--dry-run")[:-1]) == listed
    assert len(containers_of(client, run_id)) == 6
    output = cleanup()
    assert sorted(output[:-1]) == [line.replace("would remove", "removed") for line in listed]
    assert output[-1] == "removed 2 llm-ide containers; kept 1 of runs still going (--all removes them too)"
    assert len(containers_of(client, run_id)) == 4
    assert cleanup("--all") == [f"removed {live.name} (run {run_id}, created)", "removed 1 llm-ide container"]
    left = containers_of(client, run_id)
    assert sorted(c.labels.get("llm-ide.user", "-") + "@" + c.labels["llm-ide.host"] for c in left) == sorted(
        labels.get("llm-ide.user", "-") + "@" + labels["llm-ide.host"] for labels in others
    )


def test_missing_image_and_unreachable_engine_are_clear_errors(client, run_id: str, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure) as error:
        make_environment(settings(image="llm-ide-missing:nope", pull="never"), None, run_id, None, None)
    assert str(error.value) == (
        "docker image llm-ide-missing:nope not found locally; pull or build it (docker pull llm-ide-missing:nope); "
        "scripts/build_base_image.sh builds the small local base image"
    )
    for image, why in [("Bad Image!!", "repository name must be lowercase"), ("a:b:c", "its format")]:
        with pytest.raises(EnvironmentFailure) as error:  # was docker's APIError: a traceback, exit 1, a resume hint
            make_environment(settings(image=image, pull="missing"), None, run_id, None, None)
        assert str(error.value) == f"docker image {image!r} is not a valid image name ({why})"
    with pytest.raises(EnvironmentFailure, match="needs an image"):
        make_environment(settings(image=None), None, run_id, None, None)
    with pytest.raises(EnvironmentFailure) as error:  # was docker's 404 of the container's start, its URL and all
        make_environment(settings(network="nnone"), None, run_id, None, None)
    said = "environment.network nnone: no such docker network (`docker network ls` lists them; none: no network)"
    assert str(error.value) == said
    with pytest.raises(EnvironmentFailure, match="repository not found"):
        make_environment(settings(), tmp_path / "absent", run_id, None, None)
    assert containers_of(client, run_id) == []
    unreachable = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    result = invoke("cleanup", cwd=REPO_ROOT, env=unreachable)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: the Docker engine is not reachable") and result.stderr.count("\n") == 1


def conda_image(client) -> str:
    """The base image plus a conda-like layout (`etc/profile.d/conda.sh`, `envs/testbed`) as in SWE-bench images."""
    import docker

    try:
        client.images.get(CONDA_IMAGE)
        return CONDA_IMAGE
    except docker.errors.ImageNotFound:
        pass
    dockerfile = textwrap.dedent(
        f"""
        FROM {BASE_IMAGE}
        RUN mkdir -p /opt/miniconda3/envs/testbed/bin /opt/miniconda3/etc/profile.d \\
         && ln -s /usr/bin/python3 /opt/miniconda3/envs/testbed/bin/python \\
         && echo 'conda() {{ [ "$1" = activate ] && export CONDA_DEFAULT_ENV="$2" \\
              PATH="/opt/miniconda3/envs/$2/bin:$PATH"; }}' > /opt/miniconda3/etc/profile.d/conda.sh
        """
    )
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=CONDA_IMAGE, rm=True)
    return CONDA_IMAGE


@pytest.mark.parametrize(
    ("conda_env", "expected"), [("testbed", "testbed /opt/miniconda3/envs/testbed/bin/python"), ("other", "- ")]
)
def test_conda_env_is_activated_when_present(client, run_id: str, conda_env: str, expected: str) -> None:
    image = conda_image(client)
    with make_environment(settings(conda_env=conda_env), None, run_id, image, None) as env:
        output = env.execute('echo "${CONDA_DEFAULT_ENV:--} $(command -v python)"').output
        assert output == expected + "\n"


def demo_repo(path: Path) -> Path:
    demo = REPO_ROOT / "llm_ide" / "demo" / "project"
    files = {str(file.relative_to(demo)): file.read_text() for file in demo.rglob("*.py")}
    return make_git_repo(path, files)


def llm_ide_run(repo: Path, output: Path, run_id: str, script: Path, **popen: object) -> subprocess.Popen[str]:
    command = [
        *(sys.executable, "-c", "from llm_ide.cli import app; app()", "run"),
        *("--repo", str(repo), "--task-file", str(REPO_ROOT / "llm_ide/demo/task.md")),
        *("--model", f"scripted:{script}", "--config", str(REPO_ROOT / "llm_ide/demo/config.yaml")),
        *("--environment", "docker", "--image", BASE_IMAGE, "--output", str(output), "--thread-id", run_id),
    ]
    return subprocess.Popen(command, cwd=REPO_ROOT, text=True, **popen)


@pytest.mark.slow
def test_ctrl_c_on_a_docker_run_removes_its_container(client, run_id: str, tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    action = '{"command": "echo sleeping; sleep 300"}'
    script.write_text(
        "responses:\n  - |\n    <thought>Wait.</thought>\n    <action_type>bash</action_type>\n"
        f"    <action_params>{action}</action_params>\n"
    )
    process = llm_ide_run(
        demo_repo(tmp_path / "project"),
        tmp_path / "out",
        run_id,
        script,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_running(client, run_id, "sleep 300", process)
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode != 0 and "Traceback" not in stdout, stdout
    assert wait_until_gone(client, run_id) == []


def test_our_network_is_created_once_whatever_runs_at_the_same_time_and_a_duplicate_is_removed(client) -> None:
    """Docker lets concurrent creations make several networks of one name, and a container start then refuses the
    ambiguous name: parallel attempts once left three `llm-ide` networks and every later docker run failed."""
    name = f"llm-ide-test-{uuid.uuid4().hex[:8]}"

    def named() -> list:
        return [n for n in client.networks.list(names=[name]) if n.name == name]

    try:
        with ThreadPoolExecutor(6) as pool:
            assert set(pool.map(lambda _: ensure_network(client, name), range(6))) == {name}
        ids = [n.id for n in named()]
        assert len(ids) == 1
        client.networks.create(name, driver="bridge")  # a duplicate, as a race left them
        assert len(named()) == 2
        assert ensure_network(client, name) == name and [n.id for n in named()] == ids
        container = client.containers.run(BASE_IMAGE, ["true"], network=name, detach=True)
        try:
            assert container.wait(timeout=60)["StatusCode"] == 0
        finally:
            container.remove(force=True)
        assert DEFAULT_NETWORK == "llm-ide" and ensure_network(client) == DEFAULT_NETWORK
    finally:
        for network in named():
            network.remove()
