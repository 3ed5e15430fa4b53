"""Per-command overhead: our docker environment vs. one `docker exec` CLI process per command (mini-swe-agent's way)
against the same container, plus one SDK exec per command and the local environment, in one run.

Usage: python scripts/bench_env.py [--commands 200] [--image llm-ide-base:bookworm] [--files 20]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.environments.docker import DockerEnvironment

TIMED = ("docker_exec_ratio",)  # a ratio of two timings (bench_old_new)
COMMANDS = ["echo hi", "true"]
EXPECTED = {"echo hi": "hi\n", "true": ""}


def timed(run: Callable[[str], str], count: int) -> list[float]:
    """Milliseconds per command; each output is checked so that a broken path cannot look fast."""
    for command in COMMANDS:  # warm-up
        run(command)
    samples = []
    for index in range(count):
        command = COMMANDS[index % len(COMMANDS)]
        start = time.perf_counter()
        output = run(command)
        samples.append((time.perf_counter() - start) * 1000)
        if output != EXPECTED[command]:
            raise SystemExit(f"unexpected output {output!r} for {command!r}")
    return samples


def cli_runner(container_id: str, workdir: str, env: dict[str, str]) -> Callable[[str], str]:
    """mini-swe-agent's DockerEnvironment: `docker exec -w DIR -e K=V ... ID bash -lc CMD` per command."""
    prefix = ["docker", "exec", "-w", workdir]
    for key, value in env.items():
        prefix += ["-e", f"{key}={value}"]

    def run(command: str) -> str:
        return subprocess.run([*prefix, container_id, "bash", "-lc", command], capture_output=True, text=True).stdout

    return run


def sdk_exec_runner(environment: DockerEnvironment) -> Callable[[str], str]:
    """One docker-SDK exec per command (create + start + inspect for the exit code), without our session."""
    api, container_id = environment.client.api, environment.container_id

    def run(command: str) -> str:
        exec_id = api.exec_create(container_id, ["bash", "-c", command], workdir=environment.workdir)["Id"]
        output = api.exec_start(exec_id).decode()
        api.exec_inspect(exec_id)
        return output

    return run


def read_files_benchmark(environment: DockerEnvironment, count: int, rounds: int) -> dict[str, float]:
    """Milliseconds to read `count` files: our batched read_files vs. one get_archive or `docker exec cat` per file."""
    names = [f"src/file_{index}.py" for index in range(count)]
    environment.execute(
        f"mkdir -p src && for i in $(seq 0 {count - 1}); do seq 1 200 | sed 's/^/x = /' > src/file_$i.py; done"
    )
    api, container_id = environment.client.api, environment.container_id

    def ours() -> None:
        assert all(environment.read_files(names).values())

    def get_archive() -> None:
        for name in names:
            stream, _ = api.get_archive(container_id, f"{environment.workdir}/{name}")
            assert b"".join(stream)

    def cli_cat() -> None:
        for name in names:
            assert subprocess.run(
                ["docker", "exec", "-w", environment.workdir, container_id, "cat", name],
                capture_output=True,
                check=True,
            ).stdout

    results = {}
    for label, run in [
        ("ours (1 batch)", ours),
        ("SDK get_archive per file", get_archive),
        ("docker exec cat per file", cli_cat),
    ]:
        run()
        start = time.perf_counter()
        for _ in range(rounds):
            run()
        results[label] = (time.perf_counter() - start) * 1000 / rounds
    return results


def row(table: Table, label: str, samples: list[float], reference: float) -> None:
    mean = statistics.mean(samples)
    p95 = statistics.quantiles(samples, n=20)[-1]
    table.add_row(label, f"{mean:.2f}", f"{statistics.median(samples):.2f}", f"{p95:.2f}", f"{mean / reference:.3f}")


def main(
    commands: int = typer.Option(200, help="Trivial commands per path."),
    image: str = typer.Option("llm-ide-base:bookworm", help="Image of the container (all docker paths share it)."),
    files: int = typer.Option(20, help="Files per read_files batch."),
    quick: bool = typer.Option(False, help="Small sizes, the same comparison: what the test suite runs."),
) -> None:
    if quick:
        commands, files = 20, 3
    console = Console(highlight=False)
    settings = load_config("default", environment={"type": "docker", "image": image}).environment
    environment = make_environment(settings, None, "bench-env", None, None)
    assert isinstance(environment, DockerEnvironment)
    with tempfile.TemporaryDirectory() as repo, environment:
        local = LocalEnvironment(Path(repo), env=settings.env)
        env_vars = {key: str(value) for key, value in settings.env.items()}
        ours = timed(lambda command: environment.execute(command).output, commands)
        cli = timed(cli_runner(environment.container_id, environment.workdir, env_vars), commands)
        sdk = timed(sdk_exec_runner(environment), commands)
        local_samples = timed(lambda command: local.execute(command).output, commands)
        reads = read_files_benchmark(environment, files, rounds=2 if quick else 10)
        local.close()

    cli_mean = statistics.mean(cli)
    table = Table(title=f"{commands} trivial commands ({' / '.join(COMMANDS)}), ms per command")
    for column in ("path", "mean", "median", "p95", "/ docker exec CLI"):
        table.add_column(column, justify="left" if column == "path" else "right")
    row(table, "docker exec CLI per command (mini-swe-agent)", cli, cli_mean)
    row(table, "docker SDK exec per command", sdk, cli_mean)
    row(table, "ours: DockerEnvironment (session over exec API)", ours, cli_mean)
    row(table, "ours: LocalEnvironment (host subprocess)", local_samples, cli_mean)
    console.print(table)

    read_table = Table(title=f"reading {files} files of 200 lines, ms per batch")
    read_table.add_column("path")
    read_table.add_column("ms", justify="right")
    read_table.add_column("/ ours", justify="right")
    for label, value in reads.items():
        read_table.add_row(label, f"{value:.1f}", f"{value / reads['ours (1 batch)']:.1f}")
    console.print(read_table)

    ours_mean, local_mean = statistics.mean(ours), statistics.mean(local_samples)
    print(
        f"RESULT docker_exec_ratio={ours_mean / cli_mean:.3f} local_ms={local_mean:.2f} ours_ms={ours_mean:.2f} "
        f"cli_ms={cli_mean:.2f} sdk_exec_ms={statistics.mean(sdk):.2f} "
        f"read_files_ms={reads['ours (1 batch)']:.1f} read_files_cli_ms={reads['docker exec cat per file']:.1f}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in {"-h", "--help"}:
        print(__doc__)
    typer.run(main)
