#!/usr/bin/env python
"""llm-ide's memory on real runs: the 36 real mini-swe-agent trajectories of the shared data (gemini-3-pro on
SWE-bench Verified, eight repositories) replayed through llm-ide command for command (`llm-ide replay`, one process
per instance, on a checkout of the instance's branch of its repository bundle), against the original run at the same
prices.

Per run, per repository and pooled: the bill ratio llm-ide / mini at steps 10, 20, 30 and at the end (pooled: the sum
over the runs that reached the step of llm-ide's cumulative bill over the same sum for mini; and the median of the
per-run ratios), the input cost alone (the prompts; the replies are the same in both) and the uncached prompt
characters, edit grounding (the pre-image lines of each edit present in the prompt that issued it, and per edit), the
±3 lines around each edit, reference recall (pooled: all lines or references of all runs; and the median per run).
`--set tune|heldout` picks a part of the split in scripts/replay_split.yaml (tune on one, judge on the other).
Each `--config FILE` is a variant of the memory's settings, replayed and shown side by side. Each variant is replayed
under each price profile of `--profile` (by default gpt, claude55 and open, llm_ide.pricing.PROFILES): both agents are
billed with it and llm-ide's model is given it as its price, which its renewals weigh; the bills of the profiles are
shown side by side. The RESULT line holds every profile's figures of the first variant (`gpt_bill_end=…`), the other
variants' prefixed with their file's name too. `--action-format both` replays each variant with the actions in the
text and as tools (`NAME+tools`), side by side. Definitions: docs/replay.md.
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
from typing import Annotated, Literal

import typer
import yaml
from rich.console import Console
from rich.table import Table

from llm_ide.pricing import PROFILES
from llm_ide.replay.model import AGENTS, AgentStep, Fraction, Prices, ReplayReport

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SPLIT = Path(__file__).with_name("replay_split.yaml")
QUICK = ("pylint-dev__pylint-6903", "pallets__flask-5014")
MARKS = (10, 20, 30)


@dataclass
class Run:
    variant: str
    instance: str
    report: ReplayReport | None
    seconds: float
    error: str = ""
    profile: str = "gpt"

    @property
    def repo(self) -> str:
        return repo_of(self.instance)

    @property
    def group(self) -> str:
        """The variant under its price profile: `default@open`."""
        return f"{self.variant}@{self.profile}"


def repo_of(instance: str) -> str:
    """`psf__requests-1142` → `requests`."""
    return re.sub(r"-\d+$", "", instance).split("__")[-1]


def bundle_of(data: Path, instance: str) -> Path:
    return data / "repos" / (re.sub(r"-\d+$", "", instance) + ".bundle")


def variant_name(variant: Path | None) -> str:
    return variant.stem if variant else "default"


def run_name(variant: Path | None, action_format: str) -> str:
    return variant_name(variant) + ("+tools" if action_format == "tools" else "")


@dataclass(frozen=True)
class Job:
    """One replay: an instance, a variant (its config file; None: the bundled settings), a format, a price profile."""

    instance: str
    variant: Path | None
    action_format: str
    profile: str

    @property
    def name(self) -> str:
        return run_name(self.variant, self.action_format)


def replay_one(data: Path, job: Job, out: Path, single_call: bool) -> Run:
    """`llm-ide replay` in its own process; its replay.json read back."""
    trajectory = data / "trajectories" / "mini-swe-agent" / f"{job.instance}.traj.json"
    command = [sys.executable, "-m", "llm_ide", "replay", str(trajectory), "--repo", str(bundle_of(data, job.instance))]
    command += ["--out", str(out), "--misses", "0", *(["--config", str(job.variant)] if job.variant else [])]
    command += ["--single-call"] if single_call else []
    command += ["--action-format", job.action_format, "--profile", job.profile]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    run = read_run(job.name, job.instance, out, time.perf_counter() - started, job.profile)
    if run.report is None:
        run.error = (done.stderr or done.stdout).strip()[-500:]
    return run


def profile_of(prices: Prices) -> str:
    """A report's price profile (a report from before the profiles: the one its prices are)."""
    if prices.profile:
        return prices.profile
    same = [
        name
        for name in PROFILES
        if Prices.of(name).model_dump(exclude={"profile"}) == prices.model_dump(exclude={"profile"})
    ]
    return same[0] if same else "custom"


def read_run(variant: str, instance: str, out: Path, seconds: float = 0.0, profile: str = "") -> Run:
    path = out / "replay.json"
    report = ReplayReport.model_validate_json(path.read_text()) if path.is_file() else None
    profile = profile or (profile_of(report.prices) if report else "gpt")
    return Run(variant, instance, report, seconds, "" if report else f"no {path}", profile)


Cost = Callable[[ReplayReport, str, int | None], float]  # (report, agent, up to step) → the figure summed
COSTS: dict[str, Cost] = {
    "bill": lambda report, agent, mark: report.totals(agent, mark).bill,
    "input": lambda report, agent, mark: report.input_cost(agent, mark),
    "raw": lambda report, agent, mark: report.totals(agent, mark).raw,
    "uncached": lambda report, agent, mark: report.totals(agent, mark).uncached,
    "output": lambda report, agent, mark: report.totals(agent, mark).output,
}


def pooled_ratio(runs: list[Run], mark: int | None, cost: Cost) -> float | None:
    reached = [run.report for run in runs if run.report and (mark is None or len(run.report.steps) >= mark)]
    theirs = sum(cost(report, "original", mark) for report in reached)
    return sum(cost(report, "llm-ide", mark) for report in reached) / theirs if theirs else None


def median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def bill_figures(runs: list[Run]) -> dict[str, float | None]:
    """The bill (and the input cost alone) llm-ide / mini, pooled over the runs that reached each mark, and the median
    of the per-run ratios; the raw, uncached and output characters over the whole runs."""
    figures: dict[str, float | None] = {}
    reports = [run.report for run in runs if run.report]
    for mark in (*MARKS, None):
        name = "end" if mark is None else str(mark)
        figures[f"bill_{name}"] = pooled_ratio(runs, mark, COSTS["bill"])
        figures[f"bill_{name}_median"] = median([report.bill_ratio(mark) for report in reports])
        figures[f"input_{name}"] = pooled_ratio(runs, mark, COSTS["input"])
        figures[f"input_{name}_median"] = median([report.input_ratio(mark) for report in reports])
    for key in ("raw", "uncached", "output"):
        figures[key], figures[f"{key}_median"] = pooled_ratio(runs, None, COSTS[key]), None
    ratios = [report.bill_ratio(mark) for report in reports for mark in (10, 30, None)]
    figures["worst_run_bill"], figures["worst_run_bill_median"] = max_or_none(ratios), None
    return figures


FIDELITY: dict[str, Callable[[AgentStep], Fraction]] = {
    "edit_grounding": lambda t: t.pre_image,
    "edit_grounding_per_edit": lambda t: Fraction(total=t.edits, present=t.edits_grounded),
    "edit_context": lambda t: t.context,
    "reference_recall": lambda t: t.references,
}
GOAL_FIDELITY = ("edit_grounding", "edit_context", "reference_recall")


def pooled_fidelity(runs: list[Run], agent: str, key: str) -> tuple[float | None, float | None]:
    """(pooled over every line or reference of every run, median of the per-run fractions)."""
    parts = [FIDELITY[key](run.report.totals(agent)) for run in runs if run.report]
    return sum(parts, Fraction()).value, median([part.value for part in parts])


def shown(value: float | None) -> str:
    return "nan" if value is None else f"{value:.2f}"


def both(report: ReplayReport, key: str) -> str:
    return " · ".join(shown(FIDELITY[key](report.totals(agent)).value) for agent in AGENTS)


def runs_table(variant: str, runs: list[Run]) -> Table:
    table = Table(title=f"{variant}: per run, llm-ide / mini (fidelity: llm-ide · mini)")
    columns = (
        "instance",
        "steps",
        "bill 10",
        "bill 20",
        "bill 30",
        "bill end",
        "input end",
        "uncached",
        "edit grounding",
        "per edit",
        "±3 lines",
        "reference recall",
        "rc differs",
        "same tree",
        "seconds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "instance" else "right")
    for run in runs:
        report = run.report
        if report is None:
            table.add_row(run.instance, "failed", run.error[-80:], *[""] * 11, f"{run.seconds:.0f}")
            continue
        ours, theirs = report.totals("llm-ide"), report.totals("original")
        table.add_row(
            run.instance,
            str(len(report.steps)),
            *[shown(report.bill_ratio(mark)) for mark in (*MARKS, None)],
            shown(report.input_ratio()),
            shown(ours.uncached / theirs.uncached if theirs.uncached else None),
            *[both(report, key) for key in FIDELITY],
            str(len(report.differing_returncodes)),
            {True: "yes", False: "NO", None: "–"}[report.same_as_submission] + ("" if not report.diverged else " ⚠"),
            f"{run.seconds:.0f}" if run.seconds else "–",
        )
    return table


def summary(runs: list[Run]) -> dict[str, float | None]:
    figures = bill_figures(runs)
    for key in FIDELITY:
        for agent, prefix in (("llm-ide", ""), ("original", "mini_")):
            pooled, middle = pooled_fidelity(runs, agent, key)
            figures[f"{prefix}{key}"], figures[f"{prefix}{key}_median"] = pooled, middle
    for key in GOAL_FIDELITY:  # the weakest repository, as a share of mini's figure there
        figures[f"worst_repo_{key}"] = min_or_none(
            [
                vs_mini(pooled_fidelity(group, "llm-ide", key)[0], pooled_fidelity(group, "original", key)[0])
                for group in by_repo(runs).values()
            ]
        )
        figures[f"worst_repo_{key}_median"] = None
    figures["worst_run_edit_grounding"] = min_or_none(
        [run.report.totals("llm-ide").pre_image.value for run in runs if run.report]
    )
    figures["worst_run_edit_grounding_median"] = None
    return figures


def vs_mini(ours: float | None, theirs: float | None) -> float | None:
    return None if ours is None or not theirs else ours / theirs


def max_or_none(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def min_or_none(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return min(present) if present else None


def by_repo(runs: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda run: run.repo):
        groups.setdefault(run.repo, []).append(run)
    return groups


def repos_table(variant: str, runs: list[Run]) -> Table:
    """Per repository and pooled: the bill, the input cost and uncached characters against mini's, each fidelity
    figure of both agents."""
    table = Table(title=f"{variant}: per repository, pooled (llm-ide / mini; fidelity: llm-ide · mini)")
    columns = (
        "repository",
        "runs",
        "steps",
        "bill 10",
        "bill 30",
        "bill end",
        "input end",
        "uncached",
        "edit grounding",
        "±3 lines",
        "reference recall",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "repository" else "right")
    groups = by_repo(runs)
    for name, group in [*groups.items(), ("pooled", runs)]:
        figures = summary(group)
        steps = sum(len(run.report.steps) for run in group if run.report)
        fidelity = [f"{shown(figures[key])} · {shown(figures['mini_' + key])}" for key in GOAL_FIDELITY]
        row = [name, str(len(group)), str(steps), *[shown(figures[k]) for k in ("bill_10", "bill_30", "bill_end")]]
        table.add_row(*row, shown(figures["input_end"]), shown(figures["uncached"]), *fidelity)
    return table


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
        row = [
            shown(f[key]) + (f" ({shown(f[key + '_median'])})" if f[key + "_median"] is not None else "")
            for f in figures.values()
        ]
        table.add_row(key, *row)
    return table


RESULT_KEYS = (
    "bill_10",
    "bill_20",
    "bill_30",
    "bill_end",
    "bill_10_median",
    "bill_30_median",
    "bill_end_median",
    "worst_run_bill",
    "input_end",
    "uncached",
    "raw",
    "output",
    "edit_grounding",
    "mini_edit_grounding",
    "edit_grounding_per_edit",
    "mini_edit_grounding_per_edit",
    "edit_context",
    "mini_edit_context",
    "reference_recall",
    "mini_reference_recall",
    "worst_repo_edit_grounding",
    "worst_repo_edit_context",
    "worst_repo_reference_recall",
    "worst_run_edit_grounding",
)


def result_line(groups: dict[str, list[Run]]) -> str:
    """Every group's figures, each key prefixed with its profile (`gpt_bill_end`) and, but for the first variant's, its
    variant (`compact_gpt_bill_end`); `runs` and `same_tree` (in every profile) of the first variant."""
    pairs, first = [], next(iter(groups.values()))[0].variant if groups else ""
    for runs in groups.values():
        variant, profile = runs[0].variant, runs[0].profile
        prefix = ("" if variant == first else re.sub(r"[^a-z0-9_]", "_", variant.lower()) + "_") + profile + "_"
        figures = summary(runs)
        pairs += [f"{prefix}{key}={shown(figures[key])}" for key in RESULT_KEYS]
    mine = [run for runs in groups.values() for run in runs if run.variant == first]
    instances = sorted({run.instance for run in mine})
    same = sum(
        all(run.report and run.report.same_as_submission for run in mine if run.instance == i) for i in instances
    )
    return "RESULT " + " ".join([*pairs, f"runs={len(instances)}", f"same_tree={same}/{len(instances)}"])


def selected(
    data: Path, part: str, only: list[str] | None, repos: list[str] | None, quick: bool, split: Path = SPLIT
) -> list[str]:
    """The instances of the shared data to replay: those of the split's part (all: every trajectory), narrowed by
    `only` (ids, also comma-separated), `repos` (short or full names) and `quick`."""
    folder = data / "trajectories" / "mini-swe-agent"
    if not folder.is_dir():
        raise SystemExit(f"no trajectories in {folder} (--data: the shared data folder)")
    instances = sorted(path.name.removesuffix(".traj.json") for path in folder.glob("*.traj.json"))
    if part != "all":
        chosen = set(yaml.safe_load(split.read_text())[part])
        instances = [instance for instance in instances if instance in chosen]
    wanted = {name for item in only or [] for name in item.split(",") if name}
    names = {name for item in repos or [] for name in item.split(",") if name}
    return [
        instance
        for instance in instances
        if (not wanted or instance in wanted)
        and (not names or names & {repo_of(instance), re.sub(r"-\d+$", "", instance)})
        and (not quick or instance in QUICK)
    ]


def replay_all(data: Path, jobs: list[Job], folder: Path, single_call: bool, at_once: int) -> list[Run]:
    with ThreadPoolExecutor(max_workers=max(1, at_once)) as pool:
        futures = [
            pool.submit(replay_one, data, job, folder / f"{job.name}@{job.profile}" / job.instance, single_call)
            for job in jobs
        ]
        return [future.result() for future in futures]


def kept_runs(folder: Path, jobs: list[Job], named: bool) -> list[Run]:
    """The runs a former `--out` kept: `folder/<variant>[+tools]@<profile>/<instance>/replay.json` (a folder without
    `@<profile>` is under its reports' own prices); every variant unless `named`, the profiles of `jobs` (none kept:
    each job without its report)."""
    names, profiles = {job.name for job in jobs}, {job.profile for job in jobs}
    instances = list(dict.fromkeys(job.instance for job in jobs))
    runs = []
    for path in sorted(path for path in folder.iterdir() if path.is_dir()):
        name, _, profile = path.name.partition("@")
        if not named or name in names:
            runs += [read_run(name, instance, path / instance, profile=profile) for instance in instances]
    runs = [run for run in runs if run.profile in profiles]
    return runs or [read_run(job.name, job.instance, folder / "none", profile=job.profile) for job in jobs]


def grouped(done: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in done:
        groups.setdefault(run.group, []).append(run)
    return groups


def profiles_table(groups: dict[str, list[Run]]) -> Table:
    """The bill of each variant under each price profile, side by side: pooled at steps 10, 30 and the end, and the
    worst run's ratio at any of them."""
    profiles = list(dict.fromkeys(runs[0].profile for runs in groups.values()))
    variants = list(dict.fromkeys(runs[0].variant for runs in groups.values()))
    table = Table(title="the bill llm-ide / mini under each price profile (pooled at 10 / 30 / end; the worst run)")
    table.add_column("variant")
    for profile in profiles:
        table.add_column(f"{profile}: {Prices.of(profile).described() if profile in PROFILES else profile}")
    for variant in variants:
        cells = []
        for profile in profiles:
            figures = summary(groups.get(f"{variant}@{profile}", []))
            bills = " / ".join(shown(figures[f"bill_{mark}"]) for mark in ("10", "30", "end"))
            cells.append(f"{bills} ({shown(figures['worst_run_bill'])})")
        table.add_row(variant, *cells)
    return table


def report(console: Console, done: list[Run], json_out: Path | None) -> None:
    groups = grouped(done)
    for group, runs in groups.items():
        console.print(runs_table(group, runs))
        console.print(repos_table(group, runs))
    console.print(pooled_table(groups))
    console.print(profiles_table(groups))
    if json_out is not None:
        figures = {
            group: {**summary(runs), "repos": {name: summary(part) for name, part in by_repo(runs).items()}}
            for group, runs in groups.items()
        }
        json_out.write_text(json.dumps(figures, indent=1))


def main(
    quick: Annotated[bool, typer.Option(help=f"Only {', '.join(QUICK)}: what the test suite runs.")] = False,
    config: Annotated[
        list[Path] | None, typer.Option(help="A variant's config file (repeat: the variants side by side).")
    ] = None,
    default: Annotated[bool, typer.Option(help="With --config: the default settings as a variant too.")] = False,
    single_call: Annotated[bool, typer.Option(help="Every variant with agent.single_call.")] = False,
    part: Annotated[
        Literal["all", "tune", "heldout"], typer.Option("--set", help=f"A part of the split ({SPLIT.name}).")
    ] = "all",
    only: Annotated[list[str] | None, typer.Option(help="Only these instances (repeat, or comma-separated).")] = None,
    repo: Annotated[list[str] | None, typer.Option(help="Only these repositories (`sympy`; repeat).")] = None,
    jobs: Annotated[int, typer.Option(help="Replays at once (each its own process).")] = 2,
    profile: Annotated[
        list[str] | None,
        typer.Option(help=f"Price profiles (repeat): {', '.join(PROFILES)}.", show_default="all of them"),
    ] = None,
    action_format: Annotated[
        str, typer.Option(help="llm-ide's actions: text, tools, or both (each variant in both, side by side).")
    ] = "text",
    data: Annotated[Path, typer.Option(help="The shared data folder.")] = DATA,
    out: Annotated[
        Path | None, typer.Option(help="Keep each replay's report, wire log and run here.", show_default="not kept")
    ] = None,
    reports: Annotated[
        Path | None, typer.Option(help="Replay nothing: summarise the reports a former --out kept in this folder.")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the summary figures here.")] = None,
) -> None:
    console = Console(width=max(Console().width, 200))
    instances = selected(data, part, only, repo, quick)
    variants: list[Path | None] = [*([None] if default or not config else []), *(config or [])]
    formats = ["text", "tools"] if action_format == "both" else [action_format]
    if not set(formats) <= {"text", "tools"}:
        raise SystemExit(f"--action-format: text, tools or both, not {action_format}")
    profiles = profile or list(PROFILES)
    if unknown := set(profiles) - set(PROFILES):
        raise SystemExit(f"--profile: {', '.join(PROFILES)}, not {', '.join(sorted(unknown))}")
    todo = [Job(i, v, kind, name) for v in variants for name in profiles for kind in formats for i in instances]
    started = time.perf_counter()
    if reports is not None:
        done = kept_runs(reports, todo, named=bool(config) or default)
    else:
        folder = out or Path(tempfile.mkdtemp(prefix="bench-replay-"))
        try:
            done = replay_all(data, todo, folder, single_call, jobs)
        finally:
            if out is None:
                shutil.rmtree(folder, ignore_errors=True)
    report(console, done, json_out)
    kept = f"; reports in {out}/" if out else ""
    console.print(f"{len(done)} replays ({part}) in {time.perf_counter() - started:.0f} s ({jobs} at once){kept}")
    print(result_line(grouped(done)))


if __name__ == "__main__":
    typer.run(main)
