#!/usr/bin/env python
"""llm-ide's memory on real runs: the 12 real mini-swe-agent trajectories of the shared data (gemini-3-pro on
SWE-bench Verified) replayed through llm-ide command for command (`llm-ide replay`, one process per instance, on a
checkout of the instance's branch of its repository bundle), against the original run at the same prices.

Per run and pooled: the bill ratio llm-ide / mini at steps 10, 20, 30 and at the end (pooled: the sum over the runs
that reached the step of llm-ide's cumulative bill over the same sum for mini; and the median of the per-run
ratios), edit grounding (the pre-image lines of each edit present in the prompt that issued it, and per edit), the
±3 lines around each edit, reference recall (pooled: all lines or references of all runs; and the median per run).
Each `--config FILE` is a variant of the memory's settings, replayed and shown side by side (the first one's figures
make the RESULT line, the others' keys are prefixed with their file's name). `--action-format both` replays each
variant with the actions in the text and as tools (`NAME+tools`), side by side. Definitions: docs/replay.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from llm_ide.replay.model import AGENTS, AgentStep, Fraction, ReplayReport

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
QUICK = ("pylint-dev__pylint-6903", "pallets__flask-5014")
MARKS = (10, 20, 30)


@dataclass
class Run:
    variant: str
    instance: str
    report: ReplayReport | None
    seconds: float
    error: str = ""


def bundle_of(data: Path, instance: str) -> Path:
    return data / "repos" / (re.sub(r"-\d+$", "", instance) + ".bundle")


def variant_name(variant: Path | None) -> str:
    return variant.stem if variant else "default"


def run_name(variant: Path | None, action_format: str) -> str:
    return variant_name(variant) + ("+tools" if action_format == "tools" else "")


def replay_one(
    data: Path, instance: str, variant: Path | None, out: Path, single_call: bool, action_format: str = "text"
) -> Run:
    """`llm-ide replay` in its own process; its replay.json read back."""
    trajectory = data / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json"
    command = [sys.executable, "-m", "llm_ide", "replay", str(trajectory), "--repo", str(bundle_of(data, instance))]
    command += ["--out", str(out), "--misses", "0", *(["--config", str(variant)] if variant else [])]
    command += ["--single-call"] if single_call else []
    command += ["--action-format", action_format]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    seconds = time.perf_counter() - started
    name = run_name(variant, action_format)
    report_path = out / "replay.json"
    if not report_path.is_file():
        return Run(name, instance, None, seconds, (done.stderr or done.stdout).strip()[-500:])
    return Run(name, instance, ReplayReport.model_validate_json(report_path.read_text()), seconds)


def bill_until(report: ReplayReport, agent: str, mark: int | None) -> float:
    return report.totals(agent, mark).bill


def pooled_bill(runs: list[Run], mark: int | None) -> tuple[float | None, float | None, int]:
    """(pooled ratio, median of per-run ratios, runs counted) over the runs that reached `mark` (None: the end)."""
    reached = [run.report for run in runs if run.report and (mark is None or len(run.report.steps) >= mark)]
    ours = sum(bill_until(report, "llm-ide", mark) for report in reached)
    theirs = sum(bill_until(report, "original", mark) for report in reached)
    ratios = [r for report in reached if (r := report.bill_ratio(mark)) is not None]
    return (ours / theirs if theirs else None), (statistics.median(ratios) if ratios else None), len(reached)


FIDELITY: dict[str, Callable[[AgentStep], Fraction]] = {
    "edit_grounding": lambda t: t.pre_image,
    "edit_grounding_per_edit": lambda t: Fraction(total=t.edits, present=t.edits_grounded),
    "edit_context": lambda t: t.context,
    "reference_recall": lambda t: t.references,
}


def pooled_fidelity(runs: list[Run], agent: str, key: str) -> tuple[float | None, float | None]:
    """(pooled over every line or reference of every run, median of the per-run fractions)."""
    parts = [FIDELITY[key](run.report.totals(agent)) for run in runs if run.report]
    total = sum(parts, Fraction())
    values = [part.value for part in parts if part.value is not None]
    return total.value, (statistics.median(values) if values else None)


def shown(value: float | None) -> str:
    return "nan" if value is None else f"{value:.2f}"


def runs_table(variant: str, runs: list[Run]) -> Table:
    table = Table(title=f"{variant}: per run, llm-ide / mini (fidelity: llm-ide · mini)")
    columns = ("instance", "steps", "bill 10", "bill 20", "bill 30", "bill end", "edit grounding", "per edit",
               "±3 lines", "reference recall", "rc differs", "same tree", "seconds")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "instance" else "right")
    for run in runs:
        report = run.report
        if report is None:
            table.add_row(run.instance, "failed", run.error[-80:], *[""] * 9, f"{run.seconds:.0f}")
            continue
        fidelity = [
            " · ".join(shown(FIDELITY[key](report.totals(agent)).value) for agent in AGENTS) for key in FIDELITY
        ]
        table.add_row(
            run.instance,
            str(len(report.steps)),
            *[shown(report.bill_ratio(mark)) for mark in (*MARKS, None)],
            *fidelity,
            str(len(report.differing_returncodes)),
            {True: "yes", False: "NO", None: "–"}[report.same_as_submission] + ("" if not report.diverged else " ⚠"),
            f"{run.seconds:.0f}",
        )
    return table


def summary(runs: list[Run]) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for mark in (*MARKS, None):
        pooled, median, _ = pooled_bill(runs, mark)
        name = "end" if mark is None else str(mark)
        figures[f"bill_{name}"], figures[f"bill_{name}_median"] = pooled, median
    for key in FIDELITY:
        for agent, prefix in (("llm-ide", ""), ("original", "mini_")):
            pooled, median = pooled_fidelity(runs, agent, key)
            figures[f"{prefix}{key}"], figures[f"{prefix}{key}_median"] = pooled, median
    return figures


def pooled_table(variants: dict[str, list[Run]]) -> Table:
    table = Table(title="pooled over the runs (median of the per-run figures in brackets)")
    table.add_column("figure")
    for variant in variants:
        table.add_column(variant, justify="right")
    figures = {variant: summary(runs) for variant, runs in variants.items()}
    first = next(iter(figures.values()))
    for key in first:
        if key.endswith("_median"):
            continue
        row = [f"{shown(f[key])} ({shown(f[key + '_median'])})" for f in figures.values()]
        table.add_row(key, *row)
    return table


def result_line(variants: dict[str, list[Run]]) -> str:
    keys = ("bill_10", "bill_20", "bill_30", "bill_end", "bill_10_median", "bill_30_median", "bill_end_median",
            "edit_grounding", "mini_edit_grounding", "edit_grounding_per_edit", "mini_edit_grounding_per_edit",
            "edit_context", "mini_edit_context", "reference_recall", "mini_reference_recall")  # fmt: skip
    pairs = []
    for position, (variant, runs) in enumerate(variants.items()):
        prefix = "" if position == 0 else re.sub(r"[^a-z0-9_]", "_", variant.lower()) + "_"
        figures = summary(runs)
        pairs += [f"{prefix}{key}={shown(figures[key])}" for key in keys]
        if position == 0:
            same = sum(bool(run.report and run.report.same_as_submission) for run in runs)
            pairs += [f"runs={len(runs)}", f"same_tree={same}/{len(runs)}"]
    return "RESULT " + " ".join(pairs)


def main(
    quick: Annotated[bool, typer.Option(help=f"Only {', '.join(QUICK)}: what the test suite runs.")] = False,
    config: Annotated[
        list[Path] | None, typer.Option(help="A variant's config file (repeat: the variants side by side).")
    ] = None,
    default: Annotated[bool, typer.Option(help="With --config: the default settings as a variant too.")] = False,
    single_call: Annotated[bool, typer.Option(help="Every variant with agent.single_call.")] = False,
    only: Annotated[list[str] | None, typer.Option(help="Only these instances (repeat).")] = None,
    jobs: Annotated[int, typer.Option(help="Replays at once (each its own process).")] = 2,
    action_format: Annotated[
        str, typer.Option(help="llm-ide's actions: text, tools, or both (each variant in both, side by side).")
    ] = "text",
    data: Annotated[Path, typer.Option(help="The shared data folder.")] = DATA,
    out: Annotated[
        Path | None, typer.Option(help="Keep each replay's report, wire log and run here.", show_default="not kept")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the summary figures here.")] = None,
) -> None:
    console = Console(width=max(Console().width, 180))
    trajectories = data / "trajectories" / "mini-swe-agent"
    if not trajectories.is_dir():
        raise SystemExit(f"no trajectories in {trajectories} (--data: the shared data folder)")
    instances = sorted(path.name.removesuffix(".traj.json") for path in trajectories.glob("*.traj.json"))
    instances = [i for i in instances if (only is None or i in only) and (not quick or i in QUICK)]
    variants: list[Path | None] = [*([None] if default or not config else []), *(config or [])]
    formats = ["text", "tools"] if action_format == "both" else [action_format]
    if not set(formats) <= {"text", "tools"}:
        raise SystemExit(f"--action-format: text, tools or both, not {action_format}")
    folder = out or Path(tempfile.mkdtemp(prefix="bench-replay-"))
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [
                pool.submit(
                    replay_one, data, instance, variant, folder / run_name(variant, kind) / instance, single_call, kind
                )
                for variant in variants
                for kind in formats
                for instance in instances
            ]
            done = [future.result() for future in futures]
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - started
    grouped: dict[str, list[Run]] = {}
    for run in done:
        grouped.setdefault(run.variant, []).append(run)
    for variant, runs in grouped.items():
        console.print(runs_table(variant, runs))
    console.print(pooled_table(grouped))
    kept = f"; reports in {out}/" if out else ""
    console.print(f"{len(done)} replays in {seconds:.0f} s ({jobs} at once){kept}")
    if json_out is not None:
        json_out.write_text(json.dumps({variant: summary(runs) for variant, runs in grouped.items()}, indent=1))
    print(result_line(grouped))


if __name__ == "__main__":
    typer.run(main)
