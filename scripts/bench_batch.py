#!/usr/bin/env python3
"""Benchmark P6: a SWE-bench batch of 8 tiny instances in real containers, 1 worker vs 2 workers, in one run.

Two model set-ups, same responses: the scripted model (no model latency: the batch is pure agent + docker work,
CPU-bound) and an OpenAI-compatible server on loopback that answers each call after `--latency` seconds (real
models take seconds per call, so real batches mostly wait on the model). Prints the wall times, the ratios
wall(2 workers) / wall(1 worker) (goal <= 0.6) and the per-instance container start-up overhead (from a run's
"starting environment" event to its next phase), then one `RESULT` line (`batch_ratio` is the run with model
latency). Needs a Docker engine and the local base image (scripts/build_base_image.sh).
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agent_script import single_call  # noqa: E402
from openai_server import OpenAIServer, RecordedRequest, Reply  # noqa: E402
from swebench_fixtures import FIX_COMMAND, build_dataset, script, write_config, write_script  # noqa: E402

from llm_ide.swebench.batch import BatchOptions, run_batch  # noqa: E402
from llm_ide.swebench.dataset import load_dataset  # noqa: E402
from llm_ide.swebench.progress import BatchProgress  # noqa: E402

TIMED = ("batch_ratio", "batch_ratio_no_latency")  # ratios of two wall times (bench_old_new)
COMMANDS = [
    "grep -rn '# BUG' --include='*.py' .",
    "python -m pytest -q -p no:cacheprovider tests 2>&1 | tail -3",
    FIX_COMMAND,
    "git diff --stat",
    "python -m pytest -q -p no:cacheprovider tests 2>&1 | tail -3",
]


@dataclass
class LatencyServer(OpenAIServer):
    """Replays the same script for every instance (keyed by its task text), each answer after `latency` seconds."""

    script: list[str] = field(default_factory=list)
    latency: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: dict[str, int] = {}
        self.calls_lock = threading.Lock()

    def _next(self, request: RecordedRequest) -> tuple[int, Reply]:
        text = " ".join(str(message.get("content", "")) for message in request.body.get("messages", []))
        key = re.search(r"A function in (\S+) is off by one", text)
        with self.calls_lock:
            index = self.calls.get(key.group(1) if key else "", 0)
            self.calls[key.group(1) if key else ""] = index + 1
        time.sleep(self.latency)
        return index, Reply(text=self.script[min(index, len(self.script) - 1)])


class StartupClock(BatchProgress):
    """Progress that also timestamps each run's environment start-up."""

    def __init__(self, total: int) -> None:
        super().__init__(total=total, console=Console(quiet=True), live=False)
        self.started_env: dict[str, float] = {}
        self.startup: list[float] = []
        self.lock = threading.Lock()

    def event(self, instance_id: str, kind: str, **fields: Any) -> None:
        phase = fields.get("phase", "")
        with self.lock:
            if kind == "phase" and phase.startswith("starting"):
                self.started_env[instance_id] = time.perf_counter()
            elif kind == "phase" and instance_id in self.started_env:
                self.startup.append(time.perf_counter() - self.started_env.pop(instance_id))
        super().event(instance_id, kind, **fields)


def run(workdir: Path, dataset: Path, workers: int, base_url: str | None) -> tuple[float, list[float], dict[str, int]]:
    instances = load_dataset(str(dataset)).instances
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(workdir / "config.yaml")
    options = BatchOptions(
        model="bench-model" if base_url else write_script(workdir / "script.yaml", COMMANDS),
        output=workdir / f"out-{workers}",
        workers=workers,
        environment="docker",
        config_files=[config],
        base_url=base_url,
    )
    clock = StartupClock(len(instances))
    started = time.perf_counter()
    summary = run_batch(instances, options, progress=clock)
    return time.perf_counter() - started, clock.startup, summary.counts()


def main(
    instances: Annotated[int, typer.Option(help="Number of tiny instances.")] = 8,
    rounds: Annotated[int, typer.Option(help="Rounds of (1 worker, 2 workers) per set-up; the best of each.")] = 1,
    latency: Annotated[float, typer.Option(help="Seconds the loopback model takes per call.")] = 0.5,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    import docker

    if quick:
        instances, latency = 2, 0.1

    console = Console()
    walls: dict[tuple[str, int], list[float]] = {}
    startups: list[float] = []
    setups = ["scripted, no latency", f"loopback model, {latency:g}s/call"]
    with (
        tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp,
        LatencyServer(replies=["unused"], script=single_call(script(COMMANDS)), latency=latency) as server,
    ):
        workdir = Path(tmp)
        dataset, _ = build_dataset(workdir / "data", instances, client=docker.from_env())
        for setup, base_url in zip(setups, [None, server.url], strict=True):
            for round_number in range(rounds):
                for workers in (1, 2):
                    server.calls.clear()
                    where = workdir / f"{len(walls)}-{round_number}-{workers}"
                    wall, startup, counts = run(where, dataset, workers, base_url)
                    if counts != {"submitted": instances}:
                        raise SystemExit(f"bench_batch: the batch did not fix every instance: {counts}")
                    walls.setdefault((setup, workers), []).append(wall)
                    startups += startup
    best = {key: min(values) for key, values in walls.items()}
    ratios = {setup: best[(setup, 2)] / best[(setup, 1)] for setup in setups}
    startup_ms = statistics.median(startups) * 1000
    table = Table(title=f"SWE-bench batch: {instances} tiny instances, {len(COMMANDS)} commands each, docker")
    for column in ("model", "workers", "wall (best)", "per instance", "wall(2)/wall(1)"):
        table.add_column(column, justify="right")
    for setup in setups:
        for workers in (1, 2):
            wall = best[(setup, workers)]
            ratio = f"{ratios[setup]:.2f}" if workers == 2 else ""
            table.add_row(setup, str(workers), f"{wall:.2f}s", f"{wall / instances:.2f}s", ratio)
    console.print(table)
    console.print(
        f"container start-up per instance: median {startup_ms:.0f} ms, max {max(startups) * 1000:.0f} ms "
        f"over {len(startups)} runs (goal for the ratio: <= 0.6)"
    )
    print(
        f"RESULT batch_ratio={ratios[setups[1]]:.3f} batch_ratio_no_latency={ratios[setups[0]]:.3f} "
        f"startup_ms={startup_ms:.0f} wall1_s={best[(setups[1], 1)]:.2f} wall2_s={best[(setups[1], 2)]:.2f}"
    )


if __name__ == "__main__":
    typer.run(main)
