"""Issue 37 §8: a local command's limits (`environment.limits`: processes, file size, memory, CPU time), tested with
small ones. A fork bomb, a disk filler, a memory hog and a busy loop each end as that command's failure, and the run
goes on to submit."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo, require_bwrap, unavailable

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.environments.cgroups import cgroups_usable
from llm_ide.environments.limits import Limits
from llm_ide.run.single import run_task

FORKS = (
    "import os, signal, time\n"
    "children = []\n"
    "try:\n"
    "    while len(children) < 5000:\n"
    "        child = os.fork()\n"
    "        if child == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        children.append(child)\n"
    "except OSError as error:\n"
    "    print('forks refused after', len(children), error.errno)\n"
    "for child in children:\n"
    "    os.kill(child, signal.SIGKILL)\n"
    "    os.waitpid(child, 0)\n"
)
BOMB = ":(){ :|:& };:; for i in $(seq 100); do sleep 30 & done; wait"  # past the limit whatever the bomb's timing
FILLER = "head -c 5000000 /dev/zero > big; echo filler-status=$?; stat -c size=%s big"
HOG = "python3 -c 'data = bytearray(1 << 30); print(\"allocated\", len(data))'; echo hog-status=$?"
LOOP = "python3 -c 'while True: pass'; echo loop-status=$?"
LIMITS = {"processes": 40, "file_size": "1MiB", "memory": "200MiB", "cpu_seconds": 1}


def processes_enforced() -> None:
    if os.geteuid() == 0 and not cgroups_usable():
        unavailable("root without a writable cgroup file system: the kernel exempts root from RLIMIT_NPROC")


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_each_limit_fails_the_command_that_passes_it(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap":
        require_bwrap()
    processes_enforced()
    settings = load_config("default", environment={"limits": LIMITS, "sandbox": sandbox}).environment
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = LocalEnvironment.from_config(settings, repo=repo, tools_dir=tmp_path / "tools")
    try:
        forks = env.execute(f"python3 -c {shlex.quote(FORKS)}", timeout=60).output
        assert "forks refused after" in forks and int(forks.split()[3]) < LIMITS["processes"], forks
        filler = env.execute(FILLER, timeout=60).output
        assert "filler-status=153" in filler and "size=1048576" in filler, filler  # SIGXFSZ at 1 MiB
        hog = env.execute(HOG, timeout=60).output
        assert "allocated 1073741824" not in hog and "hog-status=0" not in hog, hog  # MemoryError or the OOM killer
        loop = env.execute(LOOP, timeout=60)
        assert "loop-status=152" in loop.output and not loop.timed_out, loop.output  # SIGXCPU after 1 s of CPU
        assert env.execute("echo alive", timeout=60).output == "alive\n"
        if sandbox == "bwrap":  # no capability: a command cannot raise its limits again
            raised = env.execute("ulimit -f unlimited; echo raised=$?; ulimit -H -t unlimited; echo raised=$?").output
            assert raised.count("raised=1") == 2, raised
    finally:
        env.close()


def test_a_fork_bomb_and_a_disk_filler_end_as_their_commands_failure_and_the_run_goes_on(tmp_path: Path) -> None:
    """`llm-ide run`'s way (run_task): the bomb is cut at its command's timeout, the filler at 1 MiB; then the
    agent's next command runs and the run submits."""
    require_bwrap()
    processes_enforced()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    steps = [
        act("Bomb.", "bash", command=BOMB),
        reflect(True, "Bombed."),
        act("Fill.", "bash", command=FILLER),
        reflect(True, "Filled."),
        act("Check.", "bash", command="ls; echo survived"),
        reflect(False, "Checked."),
        act("Done.", "submit"),
    ]
    settings = load_config(
        "default", environment={"limits": LIMITS, "tools": [], "command_timeout": 2}, agent={"step_limit": 10}
    )
    model = write_script(tmp_path / "s.yaml", steps)
    result = run_task("t", model=model, settings=settings, output_dir=tmp_path / "out", run_id="L", repo=repo)
    assert result.exit_status == "submitted"
    operations = json.loads(result.trajectory_path.read_text())["operations"]
    bomb, filler, check = (op["observation"] for op in operations[:3])
    assert "timed out" in bomb or "retry" in bomb or "Resource temporarily unavailable" in bomb, bomb
    assert "filler-status=153" in filler and "size=1048576" in filler
    assert "survived" in check and "big" in check
    assert (repo / "big").stat().st_size == 1 << 20


def test_limits_can_be_turned_off_and_bad_ones_are_config_errors(tmp_path: Path) -> None:
    off = {"processes": None, "file_size": None, "memory": None, "cpu_seconds": None}
    settings = load_config("default", environment={"limits": off}).environment
    assert Limits.of(settings.limits) == Limits()
    assert Limits.of(load_config("default").environment.limits) == Limits(4096, 4 << 30, 8 << 30, 3600)
    (tmp_path / "bad.yaml").write_text("environment:\n  limits:\n    file_size: lots\n")
    from llm_ide.config import ConfigError

    with pytest.raises(ConfigError, match=r"bad.yaml: environment.limits.file_size: "):
        load_config("default", [tmp_path / "bad.yaml"])
