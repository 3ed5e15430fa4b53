#!/usr/bin/env python3
"""Benchmark: a SWE-bench batch of tiny docker instances as Ray tasks, 1 node vs 2 nodes (one docker slot each), and
the same batch on the local thread pool (1 and 2 workers), in one run, all with Postgres checkpoints.

The model is an OpenAI-compatible server on loopback answering each call after `--latency` seconds (real batches
mostly wait on the model). Both Ray clusters run on this machine (`ray start --head` and a second `ray start
--address`, each its own process tree), so "2 nodes" shares this machine's cores: the ratio measures the engine's
distribution, not extra hardware. Prints a table, the Ray path's overhead per instance against the local pool
((wall(ray, 1 node) - wall(local, 1 worker) - connect) / instances, the connection to the cluster counted apart),
then one `RESULT` line. Needs Docker, the local base image (scripts/build_base_image.sh) and PostgreSQL binaries.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agent_script import single_call  # noqa: E402
from bench_batch import COMMANDS, LatencyServer  # noqa: E402
from pg_server import postgres_server  # noqa: E402
from ray_cluster import ray_cluster  # noqa: E402
from swebench_fixtures import build_dataset, script, write_config  # noqa: E402

from llm_ide.swebench.batch import BatchOptions, run_batch  # noqa: E402
from llm_ide.swebench.dataset import load_dataset  # noqa: E402
from llm_ide.swebench.progress import BatchProgress  # noqa: E402

TIMED = ("ray_node_ratio", "local_worker_ratio")  # ratios of two wall times (bench_old_new)


def fresh_database(server_url: str, name: str) -> str:
    """A database per run: the runs' threads are named by the instance ids."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_url.rsplit("/", 1)[0] + "/" + name


def batch(workdir: Path, dataset: Path, url: str, base_url: str, *, engine: str, workers: int, address: str | None):
    instances = load_dataset(str(dataset)).instances
    workdir.mkdir(parents=True, exist_ok=True)
    options = BatchOptions(
        model="bench-model",
        output=workdir / "out",
        workers=workers,
        config_files=[write_config(workdir / "config.yaml")],
        base_url=base_url,
        checkpoint=url,
        engine=engine,
        ray_address=address,
        task_cpus=0.5,
        task_memory_mb=256,
    )
    progress = BatchProgress(total=len(instances), console=Console(quiet=True), live=False)
    started = time.perf_counter()
    summary = run_batch(instances, options, progress=progress)
    wall = time.perf_counter() - started
    if summary.counts() != {"submitted": len(instances)}:
        errors = {o.instance_id: o.error or o.details.get("error", "") for o in summary.outcomes.values() if o.error}
        raise SystemExit(f"bench_ray: the {engine} batch did not fix every instance: {summary.counts()} {errors}")
    nodes = {outcome.node for outcome in summary.outcomes.values()}
    return wall, len(nodes - {""})


TABLES = """SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 2 DESC"""


class PostgresWatch:
    """Peak connections to one database while a batch runs (sampled every 0.1 s), and the bytes it holds after: in
    all, and by table (with its indexes, TOAST, free space and visibility maps; the rest is the system catalogs)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.name = url.rsplit("/", 1)[1]
        self.empty = self.size()
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def size(self) -> int:
        return self.conn.execute("SELECT pg_database_size(%s)", (self.name,)).fetchone()[0]

    def _sample(self) -> None:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
        while not self.done.wait(0.1):
            self.peak = max(self.peak, self.conn.execute(query, (self.name,)).fetchone()[0])

    def __enter__(self) -> PostgresWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.grown = self.size() - self.empty
        self.tables = dict(self.conn.execute(TABLES).fetchall())
        self.conn.close()


def connect_seconds(address: str) -> float:
    import ray

    started = time.perf_counter()
    ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray.shutdown()
    return time.perf_counter() - started


def main(
    instances: Annotated[int, typer.Option(help="Number of tiny instances.")] = 6,
    latency: Annotated[float, typer.Option(help="Seconds the loopback model takes per call.")] = 0.5,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    import docker

    if quick:
        instances, latency = 2, 0.1

    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))  # before Ray reads it, for both
    console = Console()
    walls: dict[str, tuple[float, int]] = {}
    connect: list[float] = []
    postgres: dict[str, tuple[int, int]] = {}
    tables: dict[str, dict[str, int]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp,
        LatencyServer(replies=["unused"], script=single_call(script(COMMANDS)), latency=latency) as server,
        postgres_server() as pg,
    ):
        root = Path(tmp)
        dataset, _ = build_dataset(root / "data", instances, client=docker.from_env())
        runs = [("local, 1 worker", "local", 1, 1), ("local, 2 workers", "local", 2, 1)]
        runs += [("ray, 1 node", "ray", 1, 1), ("ray, 2 nodes", "ray", 1, 2)]
        for number, (label, engine, workers, nodes) in enumerate(runs):
            server.calls.clear()
            url = fresh_database(pg, f"run{number}")
            where = root / f"run{number}"
            if engine == "local":
                with PostgresWatch(url) as watch:
                    walls[label] = batch(where, dataset, url, server.url, engine=engine, workers=workers, address=None)
                postgres[label] = (watch.peak, watch.grown)
                continue
            slots = [{"docker_slot": 1}] * nodes
            with ray_cluster(root / f"cluster{number}", slots, cpus=1) as cluster:
                connect.append(connect_seconds(cluster.address))
                with PostgresWatch(url) as watch:
                    walls[label] = batch(
                        where, dataset, url, server.url, engine=engine, workers=1, address=cluster.address
                    )
                postgres[label], tables[label] = (watch.peak, watch.grown), watch.tables
    ratio = walls["ray, 2 nodes"][0] / walls["ray, 1 node"][0]
    local_ratio = walls["local, 2 workers"][0] / walls["local, 1 worker"][0]
    connect_s = min(connect)
    overhead = (walls["ray, 1 node"][0] - walls["local, 1 worker"][0] - connect_s) / instances
    table = Table(title=f"SWE-bench batch: {instances} tiny docker instances, model {latency:g}s/call, Postgres")
    for column in ("engine", "wall", "per instance", "nodes used", "peak PG connections", "PG bytes per instance"):
        table.add_column(column, justify="right")
    for label, (wall, used) in walls.items():
        peak, grown = postgres[label]
        table.add_row(
            label, f"{wall:.2f}s", f"{wall / instances:.2f}s", str(used or "-"), str(peak), f"{grown / instances:.0f}"
        )
    console.print(table)
    two = tables["ray, 2 nodes"]
    by_table = ", ".join(f"{name} {size:,}" for name, size in two.items() if size)
    catalogs = postgres["ray, 2 nodes"][1] - sum(two.values())
    console.print(f"PG bytes of the 2-node batch by table: {by_table}; the rest (catalogs) {catalogs:,}")
    console.print(
        f"wall(2 nodes)/wall(1 node) = {ratio:.2f}; local pool wall(2)/wall(1) = {local_ratio:.2f}; "
        f"connecting to the cluster: {connect_s:.2f}s per batch; Ray path overhead: {overhead * 1000:.0f} ms/instance"
    )
    print(
        f"RESULT ray_node_ratio={ratio:.3f} local_worker_ratio={local_ratio:.3f} "
        f"ray_overhead_ms_per_instance={overhead * 1000:.0f} ray_connect_s={connect_s:.2f} "
        f"wall_ray1_s={walls['ray, 1 node'][0]:.2f} wall_ray2_s={walls['ray, 2 nodes'][0]:.2f} "
        f"wall_local1_s={walls['local, 1 worker'][0]:.2f} pg_peak_connections_2_nodes={postgres['ray, 2 nodes'][0]} "
        f"pg_bytes_per_instance={postgres['ray, 2 nodes'][1] / instances:.0f}"
    )


if __name__ == "__main__":
    typer.run(main)
