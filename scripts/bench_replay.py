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
`history_*`: the bill against full history on the replay's own outputs (the original's requests, each observation
rendered again by its own template over the replayed output), the same session for both where this machine's commands
print otherwise than the original's did.
`--set tune|heldout` picks a part of the split in scripts/replay_split.yaml (tune on one, judge on the other).
Each `--config FILE` is a variant of the memory's settings, replayed and shown side by side. Each variant is replayed
under each price profile of `--profile` (by default gpt, claude55 and open, llm_ide.pricing.PROFILES): both agents are
billed with it and llm-ide's model is given it as its price, which its renewals weigh; the bills of the profiles are
shown side by side. The RESULT line holds every profile's figures of the first variant (`gpt_bill_end=…`), the other
variants' prefixed with their file's name too. `--action-format both` replays each variant with the actions in the
text and as tools (`NAME+tools`), side by side. Definitions: docs/replay.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml
from bench_replay_figures import Run, grouped, repo_of, report, result_line
from rich.console import Console

from llm_ide.pricing import PROFILES
from llm_ide.replay.model import Prices, ReplayReport

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SPLIT = Path(__file__).with_name("replay_split.yaml")
QUICK = ("pylint-dev__pylint-6903", "pallets__flask-5014")


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


def selected(
    data: Path, part: str, only: list[str] | None, repos: list[str] | None, quick: bool, split: Path = SPLIT
) -> list[str]:
    """The instances of the shared data to replay: those of the split's part (all: every trajectory), narrowed by
    `only` (ids, also comma-separated), `repos` (short or full names) and `quick`."""
    folder = data / "trajectories" / "mini-swe-agent"
    if not folder.is_dir():
        raise SystemExit(f"no trajectories in {folder} (--data: the shared data folder, e.g. ../shared/data)")
    instances = sorted(path.name.removesuffix(".traj.json") for path in folder.glob("*.traj.json"))
    if part != "all":
        chosen = set(yaml.safe_load(split.read_text())[part])
        instances = [instance for instance in instances if instance in chosen]
    wanted = {name for item in only or [] for name in item.split(",") if name}
    names = {name for item in repos or [] for name in item.split(",") if name}
    chosen = [
        instance
        for instance in instances
        if (not wanted or instance in wanted)
        and (not names or names & {repo_of(instance), re.sub(r"-\d+$", "", instance)})
        and (not quick or instance in QUICK)
    ]
    if not chosen:
        every = len(list(folder.glob("*.traj.json")))
        given = "--set, --only, --repo and --quick as given"
        raise SystemExit(f"no trajectory chosen: none of the {every} in {folder} matches {given}")
    return chosen


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
    order = [*PROFILES, "custom"]
    runs = sorted((run for run in runs if run.profile in profiles), key=lambda run: order.index(run.profile))
    return runs or [read_run(job.name, job.instance, folder / "none", profile=job.profile) for job in jobs]


def main(
    quick: Annotated[
        bool, typer.Option(help=f"Only {', '.join(QUICK)}, under the first profile unless told: what a test runs.")
    ] = False,
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
    data: Annotated[
        Path, typer.Option(help="The shared data folder (its trajectories/ and repos/; or the folder holding it).")
    ] = DATA,
    out: Annotated[
        Path | None, typer.Option(help="Keep each replay's report, wire log and run here.", show_default="not kept")
    ] = None,
    reports: Annotated[
        Path | None, typer.Option(help="Replay nothing: summarise the reports a former --out kept in this folder.")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the summary figures here.")] = None,
) -> None:
    console = Console(width=max(Console().width, 200))
    data = data / "data" if not (data / "trajectories").is_dir() and (data / "data" / "trajectories").is_dir() else data
    variants: list[Path | None] = [*([None] if default or not config else []), *(config or [])]
    if missing := [str(path) for path in config or [] if not path.is_file()]:
        raise SystemExit(f"--config: no file {', '.join(missing)}")
    formats = ["text", "tools"] if action_format == "both" else [action_format]
    if not set(formats) <= {"text", "tools"}:
        raise SystemExit(f"--action-format: text, tools or both, not {action_format}")
    profiles = profile or list(PROFILES)[: 1 if quick else None]  # quick: a profile proves the replays, as three did
    if unknown := set(profiles) - set(PROFILES):
        raise SystemExit(f"--profile: {', '.join(PROFILES)}, not {', '.join(sorted(unknown))}")
    instances = selected(data, part, only, repo, quick)  # (the options first: a mistake in one is said at once)
    todo = [Job(i, v, kind, name) for v in variants for name in profiles for kind in formats for i in instances]
    started = time.perf_counter()
    if reports is not None and not reports.is_dir():
        raise SystemExit(f"--reports: no folder {reports}")
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
    failed = [run for run in done if run.report is None]
    ran = f"{len(done) - len(failed)} replays" + (f" ({len(failed)} failed or missing)" if failed else "")
    console.print(f"{ran} ({part}) in {time.perf_counter() - started:.0f} s ({jobs} at once){kept}")
    pythons = sorted({run.report.commands_python for run in done if run.report and run.report.commands_python})
    if pythons:  # what the replayed commands print depends on it: compare replays run with the same one
        differ = " (not the same in every replay: their outputs may differ too)" if len(pythons) > 1 else ""
        console.print(f"the commands' python3: {'; '.join(pythons)}{differ}", highlight=False)
    for run in failed:
        console.print(f"  {run.group} {run.instance}: {' '.join(run.error.split())[:200]}", highlight=False)
    print(result_line(grouped(done)))
    if failed:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
