"""The kill series of scripts/fault_suite.py: runs SIGKILLed at random moments (and at random failpoints), resumed
until they end, then compared with an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, make_git_repo
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config
from swebench_fixtures import write_script as write_batch_script

CLI = "from llm_ide.cli import app; app()"
STOPPED = "The run was stopped while this"
RERUN = "[The run was stopped while this command ran."
STEPS = [
    act("First.", "bash", command="echo one >> trail.txt"),
    reflect(False, "one"),
    act("Second.", "bash", command="sleep 0.3; echo two >> trail.txt"),
    reflect(False, "two"),
    act("Third.", "edit", path="README.md", old="demo\n", new="demo, edited\n"),
    reflect(False, "three"),
    act("Fourth.", "create", path="notes.txt", content="a note\n"),
    reflect(False, "four"),
    act("Fifth.", "bash", command="echo five >> trail.txt"),
    reflect(False, "five"),
    act("Done.", "submit"),
]
THOUGHTS = ["First.", "Second.", "Third.", "Fourth.", "Fifth.", "Done."]
TRAIL = {1: "one", 2: "two", 5: "five"}  # operation number → the line its command appends
FAILPOINTS = dict.fromkeys(
    ["local", "postgres", "docker"], ["checkpoint.writes", "execute.begun", "execute.done", "run.ended"]
)
MAX_HITS = {"checkpoint.writes": 26, "execute.begun": 5, "execute.done": 5, "run.ended": 1}

Record = Callable[[str, str, bool, str], None]


def start(args: list[str], cwd: Path, failpoints: str = "") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "LLM_IDE_FAILPOINTS"}
    if failpoints:
        env["LLM_IDE_FAILPOINTS"] = failpoints
    return subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def attempt(args: list[str], cwd: Path, rng: random.Random, mode: str, window: float, kind: str) -> str:
    """One start of the run, killed by a random failpoint or at a random moment; what was done to it."""
    if mode == "failpoint":
        name = rng.choice(FAILPOINTS[kind])
        spec = f"{name}={rng.randint(1, MAX_HITS[name])}"
        process = start(args, cwd, spec)
        process.communicate(timeout=600)
        return spec if process.returncode == -signal.SIGKILL else f"{spec} (not reached)"
    delay = rng.uniform(0.2, window)
    process = start(args, cwd)
    try:
        process.communicate(timeout=delay)
        return f"ended before {delay:.1f}s"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"killed at {delay:.1f}s"


def containers(run_id: str) -> list[str]:
    result = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=llm-ide.run-id={run_id}"], capture_output=True, text=True
    )
    return result.stdout.split()


def trail_lines(patch: str) -> list[str]:
    section = patch.partition("diff --git a/trail.txt b/trail.txt")[2].partition("diff --git")[0]
    return [line[1:] for line in section.splitlines() if line.startswith("+") and not line.startswith("+++")]


def check_run(root: Path, run_id: str, code: int, output: str) -> str:
    """'' when the resumed run matches an uninterrupted one, else what differs."""
    if code != 0:
        return f"final run exited {code}: {output.strip().splitlines()[-1:] if output.strip() else ''}"
    traj = json.loads((root / "out" / f"{run_id}.traj.json").read_text())
    ops = traj["operations"]
    if [o["thought"] for o in ops] != THOUGHTS:
        return f"operations {[o['thought'] for o in ops]}"
    if [c["index"] for c in traj["model_calls"]] != list(range(len(THOUGHTS))):  # one call per step, the default
        return "model calls out of step"
    patch = traj["info"]["submission"]
    lines = trail_lines(patch)  # from the patch: a docker run leaves the host's repository as it was
    if len(lines) != len(set(lines)):
        return f"a command ran twice: {lines}"
    missing = [word for word in TRAIL.values() if word not in lines]  # each command's effect exactly once
    if missing:
        return f"lost side effects {missing}"
    if any(STOPPED in o["observation"] and not o["observation"].startswith(RERUN) for o in ops):
        return "an interrupted operation was not run again"
    if "+demo, edited" not in patch or "+a note" not in patch:
        return "the patch lost the edit or the created file"
    return ""


def kill_trial(kind: str, trial: int, rng: random.Random, window: float, extra: list[str], record: Record) -> None:
    with tempfile.TemporaryDirectory(prefix=f"fault-{kind}-") as tmp:
        root = Path(tmp)
        make_git_repo(root / "repo", {"README.md": "demo\n"})
        (root / "c.yaml").write_text("environment:\n  tools: []\n")
        run_id = f"fault-{kind}-{trial}-{rng.randrange(10**6)}"
        args = ["run", "--repo", str(root / "repo"), "--task", "trail", "--model", write_script(root / "s.yaml", STEPS)]
        args += ["--thread-id", run_id, "--output", str(root / "out"), "--config", str(root / "c.yaml"), *extra]
        done: list[str] = []
        for _ in range(rng.randint(1, 3)):  # up to three kills in a row, until one start runs to its end
            done.append(attempt(args, root, rng, rng.choice(["time", "failpoint"]), window, kind))
            if done[-1].startswith("ended") or done[-1].endswith("(not reached)"):
                break
        final = start(args, root)
        output = final.communicate(timeout=600)[0].decode(errors="replace")
        problem = check_run(root, run_id, final.returncode, output)
        if kind == "docker" and not problem:
            deadline = time.monotonic() + 60
            while containers(run_id) and time.monotonic() < deadline:
                time.sleep(0.5)
            problem = f"containers left: {containers(run_id)}" if containers(run_id) else ""
        record("kills", f"{kind} #{trial}: {', '.join(done)}", not problem, problem)


def reference_seconds(extra: list[str]) -> float:
    """Wall time of an uninterrupted run (the window random kills fall in)."""
    with tempfile.TemporaryDirectory(prefix="fault-ref-") as tmp:
        root = Path(tmp)
        make_git_repo(root / "repo", {"README.md": "demo\n"})
        (root / "c.yaml").write_text("environment:\n  tools: []\n")
        args = ["run", "--repo", str(root / "repo"), "--task", "trail", "--model", write_script(root / "s.yaml", STEPS)]
        args += ["--thread-id", "ref", "--output", str(root / "out"), "--config", str(root / "c.yaml"), *extra]
        started = time.monotonic()
        process = start(args, root)
        output = process.communicate(timeout=600)[0].decode(errors="replace")
        if process.returncode != 0 or check_run(root, "ref", process.returncode, output):
            raise SystemExit(f"the uninterrupted reference run failed: {output[-500:]}")
        return time.monotonic() - started


def batch_trial(trial: int, rng: random.Random, window: float, record: Record) -> None:
    with tempfile.TemporaryDirectory(prefix="fault-batch-") as tmp:
        root = Path(tmp)
        dataset, rows = build_dataset(root / "data", 3)
        model = write_batch_script(root / "fix.yaml", ["echo ran >> trail.txt", FIX_COMMAND])
        args = ["swebench", "--subset", str(dataset), "--environment", "local", "--model", model, "-w", "2"]
        args += ["-c", str(write_config(root / "c.yaml")), "-o", str(root / "out")]
        done = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.5:
                name = rng.choice(["checkpoint.writes", "execute.done", "run.ended"])
                spec = f"{name}={rng.randint(1, {'checkpoint.writes': 40, 'execute.done': 6, 'run.ended': 3}[name])}"
                process = start(args, root, spec)
                process.communicate(timeout=600)
                done.append(spec)
            else:
                done.append(attempt(args, root, rng, "time", window, "local"))
            if done[-1].startswith("ended"):
                break
        final = start(args, root)
        output = final.communicate(timeout=600)[0].decode(errors="replace")
        problem = "" if final.returncode == 0 else f"final batch exited {final.returncode}: {output[-300:]}"
        if not problem:
            preds = json.loads((root / "out" / "preds.json").read_text())
            for row in rows:
                patch = preds.get(row["instance_id"], {}).get("model_patch") or ""
                traj = json.loads((root / "out" / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
                stopped = any(o["observation"].startswith(STOPPED) for o in traj["operations"])
                if (row["patch"] not in patch and not stopped) or patch.count("+ran") > 1:
                    problem = f"{row['instance_id']}: patch lost or a command ran twice"
        record("kills", f"batch #{trial}: {', '.join(done)}", not problem, problem)


def run_kills(rng: random.Random, counts: dict[str, int], record: Record, postgres_url: str | None) -> None:
    local = reference_seconds([])
    for trial in range(counts["local"]):
        kill_trial("local", trial, rng, local, [], record)
    if postgres_url:
        extra = ["--checkpoint", postgres_url]
        window = reference_seconds(extra)
        for trial in range(counts["postgres"]):
            kill_trial("postgres", trial, rng, window, extra, record)
    if counts["docker"]:
        extra = ["--environment", "docker", "--image", BASE_IMAGE]
        window = reference_seconds(extra)
        for trial in range(counts["docker"]):
            kill_trial("docker", trial, rng, window, extra, record)
    for trial in range(counts["batch"]):
        batch_trial(trial, rng, local, record)
