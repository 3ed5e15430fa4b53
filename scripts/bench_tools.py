"""Tool installation per run, cold (empty tool cache: what every run paid before the cache) vs warm (the per-user
cache filled by the cold run), for the local and the docker environment, in one run; plus the time `llm-ide run`
takes to reject a model without an API key (it must fail before any tool installs).

Warm runs are offline: locally pip's index is an unreachable loopback URL; in docker the container has no network.
Each run gets a fresh environment (a new LocalEnvironment, a new container); the time is `install_tools` alone.

Usage: python scripts/bench_tools.py [--runs 5] [--tools debugger,navigator] [--image llm-ide-base:bookworm]
       [--no-docker]
Goal (issue 8 §2): warm install ≤ 2 s per run; a missing key reported in ≤ 3 s.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from llm_ide.environments import LocalEnvironment
from llm_ide.environments.base import Environment
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.installer import install_tools

WARM_GOAL = 2.0
ERROR_GOAL = 3.0
console = Console(highlight=False, width=120)


def make_repo(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "app.py").write_text("def f(x):\n    return x * 2\n\n\nprint(f(21))\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@llm-ide"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run([*git, *args], cwd=folder, check=True)
    return folder


def unreachable_index() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/simple"


def install_seconds(env: Environment, tools: list[str], cache: ToolCache, expect: str) -> float:
    """`install_tools` wall time; every tool must install, cold ones built, warm ones from the cache, and work."""
    start = time.perf_counter()
    report = install_tools(env, tools, {"workdir": env.workdir}, cache=cache)
    seconds = time.perf_counter() - start
    if report.failed:
        raise SystemExit(f"tool {report.failed[0].name} failed: {report.failed[0].reason}")
    hows = {tool.name: tool.how for tool in report.installed}
    if any(how != expect for how in hows.values()):
        raise SystemExit(f"expected every tool {expect!r}, got {hows}")
    for tool in report.installed:
        check = env.execute(f"{tool.invocation} --help")
        if check.returncode != 0:
            raise SystemExit(f"{tool.name} does not run after its install: {check.output[-500:]}")
    return seconds


def measure(make_env: Callable[[bool], Environment], tools: list[str], cache: ToolCache, runs: int) -> dict:
    """One cold install, then `runs` warm ones; each in a fresh environment (`make_env(offline)`)."""
    with make_env(False) as env:
        cold = install_seconds(env, tools, cache, "built and cached")
    warm = []
    for _ in range(runs):
        with make_env(True) as env:
            warm.append(install_seconds(env, tools, cache, "from cache"))
    return {"cold": cold, "warm": warm}


def missing_key_seconds(repo: Path, cache_root: Path) -> float:
    """`llm-ide run --model openai:x` without OPENAI_API_KEY: wall time to its one-line error (exit status 2)."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    environ["LLM_IDE_TOOLS_CACHE"] = str(cache_root)
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", "run", "--repo", str(repo), "--task", "t"]
    start = time.perf_counter()
    done = subprocess.run([*command, "--model", "openai:x"], capture_output=True, text=True, env=environ)
    seconds = time.perf_counter() - start
    if done.returncode != 2 or len(done.stderr.splitlines()) != 1 or cache_root.exists():
        raise SystemExit(
            f"expected one line and exit status 2 before any install, got {done.returncode}: {done.stderr}"
        )
    return seconds


def main(
    runs: int = typer.Option(5, help="Warm runs per environment."),
    tools: str = typer.Option("debugger,navigator", help="Comma-separated tools to install."),
    image: str = typer.Option("llm-ide-base:bookworm", help="Docker image."),
    docker: bool = typer.Option(True, help="Also measure the docker environment."),
    quick: bool = typer.Option(False, help="Small sizes, the same comparison: what the test suite runs."),
) -> None:
    runs = 1 if quick else runs  # a warm install from the cache, offline, proves the comparison
    names = [name.strip() for name in tools.split(",") if name.strip()]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as scratch:
        root = Path(scratch)
        repo = make_repo(root / "repo")
        error_seconds = missing_key_seconds(repo, root / "untouched-cache")

        cache = ToolCache(root / "cache")
        offline_pip = {"PIP_INDEX_URL": unreachable_index(), "PIP_RETRIES": "0"}

        def local_env(offline: bool) -> Environment:
            return LocalEnvironment(repo, env=offline_pip if offline else {}, command_timeout=900)

        console.print(f"local: {len(names)} tools, 1 cold + {runs} warm installs …")
        results["local"] = measure(local_env, names, cache, runs)

        if docker:
            from llm_ide.environments.docker import DockerEnvironment

            def docker_env(offline: bool) -> Environment:
                return DockerEnvironment(
                    image,
                    run_id=f"bench-tools-{uuid.uuid4().hex[:8]}",
                    repo=repo,
                    network="none" if offline else "host",
                    command_timeout=900,
                    tools_cache=cache.root / "docker",
                )

            console.print(f"docker: {len(names)} tools, 1 cold + {runs} warm installs …")
            results["docker"] = measure(docker_env, names, cache, runs)

    table = Table(
        "environment", "cold (s)", "warm median (s)", "warm max (s)", "cold / warm", f"warm ≤ {WARM_GOAL:g} s"
    )
    for kind, result in results.items():
        median, worst = statistics.median(result["warm"]), max(result["warm"])
        ok = "yes" if worst <= WARM_GOAL else "NO"
        table.add_row(
            kind, f"{result['cold']:.2f}", f"{median:.2f}", f"{worst:.2f}", f"{result['cold'] / median:.0f}×", ok
        )
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    console.print(f"tools: {', '.join(names)}; warm runs: {runs} each (offline); {os.cpu_count()} CPUs, load {load}")
    console.print(table)
    console.print(
        f"`llm-ide run --model openai:x` without a key: error after {error_seconds:.2f} s (goal ≤ {ERROR_GOAL:g} s)"
    )
    fields = [
        f"{kind}_cold_s={r['cold']:.2f} {kind}_warm_s={statistics.median(r['warm']):.2f}" for kind, r in results.items()
    ]
    goal = all(max(r["warm"]) <= WARM_GOAL for r in results.values()) and error_seconds <= ERROR_GOAL
    print(f"RESULT {' '.join(fields)} missing_key_error_s={error_seconds:.2f} goal_met={str(goal).lower()}")


if __name__ == "__main__":
    typer.run(main)
