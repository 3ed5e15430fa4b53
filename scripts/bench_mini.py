"""mini-swe-agent's own venv for the benches that play it (bench_cost, bench_step_cpu): created once with uv under the
user cache, then warmed by one short session so that its runs find the bytecode of every module they import."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from llm_ide.replay.endpoint import LoopbackEndpoint, completion

MINI_VERSION = "2.4.6"
HERE = Path(__file__).resolve().parent
WARM_UP = ["ls", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "llm-ide" / "bench" / f"mini-swe-agent-{MINI_VERSION}"


def mini_python(console: Console) -> Path:
    """The venv's interpreter. uv leaves modules as source: where PYTHONDONTWRITEBYTECODE is set, every start compiled
    litellm again (~4 s of CPU) and so did its first calls, inside the steps bench_step_cpu measures. Compiling all
    9,841 modules (uv's --compile-bytecode) took ~45 s of CPU; the warm-up compiles the ones a session imports."""
    venv = cache_dir()
    python = venv / "bin" / "python"
    marker, installed = venv / ".installed", f"{MINI_VERSION} warmed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:  # two benches at once: one installs, the other waits
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and python.exists() and marker.read_text() == installed:
            return python
        uv = shutil.which("uv")
        if uv is None:
            raise SystemExit("the benches need `uv` on PATH to install mini-swe-agent into its own venv")
        console.print(f"installing mini-swe-agent=={MINI_VERSION} into {venv}")
        subprocess.run([uv, "venv", "-q", "--clear", "-p", "3.11", str(venv)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "-p", str(python), f"mini-swe-agent=={MINI_VERSION}"], check=True)
        warm_up(python)
        marker.write_text(installed)
    return python


def warm_up(python: Path) -> None:
    """A two-step session (a command, the submission) through a loopback endpoint, bytecode written."""
    replies = iter(f"THOUGHT: warming up\n\n```mswea_bash_command\n{command}\n```" for command in WARM_UP)

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, completion(str(body.get("model")), next(replies, WARM_UP[-1]), 0, 0, 0)

    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update(MSWEA_SILENT_STARTUP="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    with tempfile.TemporaryDirectory(prefix="bench-mini-warm-up-") as folder, LoopbackEndpoint(answer, ["w"]) as end:
        (Path(folder) / "task.md").write_text("List the files, then submit.\n")
        command = [str(python), str(HERE / "bench_cost_mini.py"), f"{folder}/task.md", folder, f"{folder}/t.json"]
        done = subprocess.run([*command, "w", end.url], env=environ, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"mini-swe-agent's warm-up session failed:\n{done.stdout[-1000:]}{done.stderr[-2000:]}")
