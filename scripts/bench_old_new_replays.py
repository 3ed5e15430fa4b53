#!/usr/bin/env python
"""Old against new on the 36 real runs (issue 39 point 8): each trajectory replayed through both checkouts'
`llm-ide replay` (one process per replay, each checkout's package on the path), and each instance's bill side by side
under each price profile, with why it moved.

A checkout whose replay knows the price profiles (`--profile`) replays each instance once per profile: its memory
weighs that profile's prices. One from before them (0922c50) replays each instance once, with its bundled memory
settings (`memory.cached_price` 0.1), and its per-step characters (uncached, re-read, output) are billed under each
profile: what that version, as shipped, would have cost there. Mini's side of every replay is the original run billed
the same way, so the two checkouts' `mini` columns must agree.

Why a bill moved, read off the figures: `same` (within 0.5%); `shorter prompts` / `longer prompts` (fewer or more
characters sent and fewer or more uncached); `fewer rewrites` (more characters sent, fewer of them uncached: the
prompt kept growing like full history's where the old one was rewritten, a renewal that would not pay skipped) or
`more rewrites` (the reverse). A rewrite is a step whose llm-ide calls re-read less than half of what they sent. A
replay whose commands returned otherwise than the original's (`rc`) or whose tree differs from the submission is said.

`--old` is a folder or a revision (`git archive`, `../shared` beside it); `--old-reports`/`--new-reports` read the
reports a former `--out` kept (or a `bench_replay.py --out` folder) instead of replaying. The last line is `RESULT`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from bench_old_new import checkout
from bench_replay import DATA, QUICK, bundle_of
from rich.console import Console
from rich.table import Table

from llm_ide.pricing import PROFILES
from llm_ide.replay.model import Prices

HERE = Path(__file__).resolve().parents[1]
SAME = 0.005  # a relative difference of the bills below this is no difference
SIDES = ("old", "new")
TRAJECTORIES = Path("trajectories") / "mini-swe-agent"


@dataclass(frozen=True)
class Figures:
    """One agent's side of one replay under one profile, summed over its steps."""

    bill: float
    raw: int
    uncached: int
    output: int
    rewrites: tuple[int, ...]  # the steps whose calls re-read less than half of what they sent (after the first)


@dataclass(frozen=True)
class Replayed:
    """One replay's figures: llm-ide's and the original's, and what may make it differ from another replay."""

    steps: int
    ours: Figures
    mini: Figures
    returncodes: int  # steps whose command returned otherwise than the original's
    same_tree: bool | None


def figures(steps: list[dict[str, Any]], agent: str, prices: Prices) -> Figures:
    parts = [step["agents"][agent] for step in steps]
    rewrites = tuple(
        step["step"] for step, part in zip(steps[1:], parts[1:], strict=True) if part["cached"] < part["raw"] / 2
    )
    return Figures(
        bill=sum(prices.bill(part["raw"], part["cached"], part["output"]) for part in parts),
        raw=sum(part["raw"] for part in parts),
        uncached=sum(part["raw"] - part["cached"] for part in parts),
        output=sum(part["output"] for part in parts),
        rewrites=rewrites,
    )


def read_report(path: Path, profile: str) -> Replayed | None:
    """A replay.json billed under `profile` (its steps' characters, whatever prices it was written with)."""
    if not path.is_file():
        return None
    report = json.loads(path.read_text())
    steps, prices = report.get("steps") or [], Prices.of(profile)
    if not steps:
        return None
    return Replayed(
        steps=len(steps),
        ours=figures(steps, "llm-ide", prices),
        mini=figures(steps, "original", prices),
        returncodes=len(report.get("differing_returncodes") or []),
        same_tree=report.get("same_as_submission"),
    )


def knows_profiles(root: Path) -> bool:
    """Whether the checkout's replay takes a price profile (`llm-ide replay --profile`)."""
    return "PROFILES" in (root / "llm_ide" / "pricing.py").read_text()


def report_path(folder: Path, instance: str, profile: str, profiled: bool) -> Path:
    """Where a replay's report is kept: `<folder>/default@<profile>/<instance>/` (one replay per profile), or
    `<folder>/default/<instance>/` for a checkout that replays once."""
    return folder / (f"default@{profile}" if profiled else "default") / instance / "replay.json"


def told(root: Path, profile: str, folder: Path) -> list[str]:
    """The options that tell the checkout's replay the profile's prices: `--profile`, or for a checkout from before
    the profiles a config file of the memory's one price setting (`memory.cached_price`, a re-read's share)."""
    if knows_profiles(root):
        return ["--profile", profile]
    price = PROFILES[profile]
    config = folder / f"memory@{profile}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"memory": {"cached_price": price.read / price.write}}))
    return ["--config", str(config)]


def replay(root: Path, data: Path, instance: str, out: Path, options: list[str]) -> None:
    """`llm-ide replay` of the checkout at `root` (its package first on the path) into `out`."""
    trajectory = data / TRAJECTORIES / f"{instance}.traj.json"
    command = [sys.executable, "-m", "llm_ide", "replay", str(trajectory), "--repo", str(bundle_of(data, instance))]
    command += ["--out", str(out), "--misses", "0", *options]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=root)
    if not (out / "replay.json").is_file():  # shown as not replayed ("—"); why, here
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        print(f"{instance} ({root}): no report, exit {done.returncode}: {' '.join(tail)[:200]}", file=sys.stderr)


def replay_side(
    root: Path, data: Path, instances: list[str], profiles: list[str], out: Path, jobs: int, profiled: bool
) -> None:
    """Every replay of one checkout not kept in `out` already: one per profile told its prices if `profiled`, else
    one with its own settings."""
    todo = [
        (instance, told(root, profile, out) if profiled else [], report_path(out, instance, profile, profiled))
        for profile in (profiles if profiled else profiles[:1])
        for instance in instances
    ]
    todo = [job for job in todo if not job[2].is_file()]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for done in pool.map(lambda job: replay(root, data, job[0], job[2].parent, job[1]), todo):
            del done


def steps_text(steps: tuple[int, ...]) -> str:
    return ",".join(map(str, steps)) or "none"


def why(old: Replayed, new: Replayed) -> str:
    """What moved the bill, read off the two replays' figures."""
    notes = []
    if old.mini.bill != new.mini.bill or old.steps != new.steps:
        notes.append(f"mini's bill differs ({old.steps} / {new.steps} steps): not the same replay")
    a, b = old.ours, new.ours
    sent, uncached = f"sent {b.raw / a.raw - 1:+.0%}", f"uncached {b.uncached / a.uncached - 1:+.0%}"
    if abs(b.bill - a.bill) <= SAME * a.bill:
        notes.append("same")
    elif a.rewrites != b.rewrites:
        change = (
            "fewer" if len(b.rewrites) < len(a.rewrites) else "more" if len(b.rewrites) > len(a.rewrites) else "other"
        )
        notes.append(f"{change} rewrites ({sent}, {uncached})")
    else:
        notes.append(f"{'longer' if b.raw > a.raw else 'shorter'} prompts, the same rewrites ({sent}, {uncached})")
    if b.output != a.output:
        notes.append(f"replies {b.output - a.output:+,} chars")
    if old.returncodes != new.returncodes:
        notes.append(f"commands returned otherwise than the original at {old.returncodes} / {new.returncodes} steps")
    if old.same_tree != new.same_tree:
        notes.append(f"same tree {old.same_tree} / {new.same_tree}")
    return "; ".join(notes)


def instance_table(profile: str, rows: dict[str, dict[str, Replayed | None]]) -> Table:
    table = Table(title=f"{profile} ({Prices.of(profile).described()}): llm-ide's bill per instance, old against new")
    columns = ("instance", "steps", "mini", "old", "new", "new/old", "old/mini", "new/mini", "rewritten at", "why")
    for column in columns:
        table.add_column(column, justify="left" if column in ("instance", "why") else "right")
    for instance, sides in rows.items():
        old, new = sides["old"], sides["new"]
        if old is None or new is None:
            table.add_row(instance, "", "", *(("—" if side is None else "ok") for side in (old, new)), *[""] * 5)
            continue
        table.add_row(
            instance,
            str(new.steps),
            f"{new.mini.bill:,.0f}",
            f"{old.ours.bill:,.0f}",
            f"{new.ours.bill:,.0f}",
            f"{new.ours.bill / old.ours.bill:.3f}",
            f"{old.ours.bill / old.mini.bill:.3f}",
            f"{new.ours.bill / new.mini.bill:.3f}",
            f"{steps_text(old.ours.rewrites)} / {steps_text(new.ours.rewrites)}",
            why(old, new),
        )
    return table


def verdicts(rows: dict[str, dict[str, Replayed | None]]) -> dict[str, float | int]:
    """Instances better, the same and worse (new against old), and the pooled bills, over the instances both have."""
    pairs = [(sides["old"], sides["new"]) for sides in rows.values() if sides["old"] and sides["new"]]
    counts = {"better": 0, "same": 0, "worse": 0}
    for old, new in pairs:
        change = (new.ours.bill - old.ours.bill) / old.ours.bill
        counts["same" if abs(change) <= SAME else "better" if change < 0 else "worse"] += 1
    old_bill, new_bill = sum(old.ours.bill for old, _ in pairs), sum(new.ours.bill for _, new in pairs)
    mini = sum(new.mini.bill for _, new in pairs)
    pooled = {"pooled_new_old": new_bill / old_bill if old_bill else 0.0}
    return {
        **counts,
        **pooled,
        "old_mini": old_bill / mini if mini else 0.0,
        "new_mini": new_bill / mini if mini else 0.0,
    }


def table_rows(
    folders: dict[str, Path], profiled: dict[str, bool], instances: list[str], profile: str
) -> dict[str, Any]:
    return {
        instance: {
            side: read_report(report_path(folders[side], instance, profile, profiled[side]), profile) for side in SIDES
        }
        for instance in instances
    }


def main(
    old: Annotated[str, typer.Option(help="The old checkout's folder, or a revision to unpack.")] = "0922c50",
    new: Annotated[Path, typer.Option(help="The new checkout.")] = HERE,
    profile: Annotated[list[str] | None, typer.Option(help="Price profiles (repeat).", show_default="all")] = None,
    only: Annotated[list[str] | None, typer.Option(help="Only these instances (repeat).")] = None,
    quick: Annotated[bool, typer.Option(help=f"Only {', '.join(QUICK)}, under the first profile unless told.")] = False,
    jobs: Annotated[int, typer.Option(help="Replays at once (each its own process).")] = 2,
    out: Annotated[Path | None, typer.Option(help="Keep the reports here (old/, new/).")] = None,
    old_reports: Annotated[Path | None, typer.Option(help="The old side's kept reports: replay none.")] = None,
    new_reports: Annotated[Path | None, typer.Option(help="The new side's kept reports: replay none.")] = None,
    data: Annotated[Path, typer.Option(help="The shared data folder.")] = DATA,
    tell_old: Annotated[
        bool, typer.Option(help="Replay an old checkout without profiles once per profile, told its prices.")
    ] = False,
    markdown_out: Annotated[
        Path | None, typer.Option("--markdown", help="Write the per-instance bills as one Markdown table here.")
    ] = None,
) -> None:
    profiles = profile or list(PROFILES)[: 1 if quick else None]  # quick: the new side replays once per profile
    if unknown := set(profiles) - set(PROFILES):
        raise SystemExit(f"--profile: {', '.join(PROFILES)}, not {', '.join(sorted(unknown))}")
    folder = out or Path(tempfile.mkdtemp(prefix="bench-old-new-replays-"))
    try:
        compared(
            old,
            new.resolve(),
            profiles,
            instances(data, only, quick),
            folder,
            jobs,
            data,
            tell_old,
            markdown_out,
            old_reports,
            new_reports,
        )
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)


def instances(data: Path, only: list[str] | None, quick: bool) -> list[str]:
    names = sorted(path.name.removesuffix(".traj.json") for path in (data / TRAJECTORIES).glob("*.traj.json"))
    if unknown := sorted(set(only or []) - set(names)):
        raise SystemExit(f"--only {' '.join(unknown)}: no such trajectory in {data / TRAJECTORIES}")
    return [name for name in names if (not only or name in only) and (not quick or name in QUICK)]


def compared(
    old: str,
    new: Path,
    profiles: list[str],
    instances: list[str],
    folder: Path,
    jobs: int,
    data: Path,
    tell_old: bool,
    written: Path | None,
    *kept: Path | None,
) -> None:
    """Both sides replayed (or their kept reports read), then shown."""
    with checkout(old, new) as old_root:
        roots = {"old": old_root, "new": new}
        profiled = {side: knows_profiles(roots[side]) or (side == "old" and tell_old) for side in SIDES}
        folders = {side: kept[index] or folder / side for index, side in enumerate(SIDES)}
        for index, side in enumerate(SIDES):
            if not kept[index]:
                replay_side(roots[side], data, instances, profiles, folders[side], jobs, profiled[side])
        show(folders, profiled, instances, profiles, written)


def markdown(tables: dict[str, dict[str, dict[str, Replayed | None]]]) -> str:
    """The instances' bills of every profile in one Markdown table: new/old, and why where the bill moved."""
    profiles = list(tables)
    lines = [
        f"| instance | steps | {' | '.join(f'{name} new/old' for name in profiles)} | why (where it moved) |",
        f"|---|---:|{'---:|' * len(profiles)}---|",
    ]
    for instance in next(iter(tables.values()), {}):
        pairs = {name: (rows[instance]["old"], rows[instance]["new"]) for name, rows in tables.items()}
        done = {name: (old, new) for name, (old, new) in pairs.items() if old is not None and new is not None}
        ratios = [f"{done[name][1].ours.bill / done[name][0].ours.bill:.3f}" if name in done else "—" for name in pairs]
        said = "; ".join(
            f"{name}: {text} (rewritten at {steps_text(old.ours.rewrites)} / {steps_text(new.ours.rewrites)})"
            for name, (old, new) in done.items()
            if (text := why(old, new)) != "same"
        )
        steps = next((str(new.steps) for _, new in done.values()), "")
        lines.append(f"| {instance} | {steps} | {' | '.join(ratios)} | {said or ('same' if done else '')} |")
    return "\n".join(lines) + "\n"


def show(
    folders: dict[str, Path],
    profiled: dict[str, bool],
    instances: list[str],
    profiles: list[str],
    written: Path | None = None,
) -> None:
    console = Console(width=220)
    tables = {name: table_rows(folders, profiled, instances, name) for name in profiles}
    if written:
        written.write_text(markdown(tables))
    summary = Table(title="per profile: instances whose llm-ide bill is better / the same / worse, and pooled bills")
    for column in ("profile", "better", "same", "worse", "pooled new/old", "old/mini", "new/mini"):
        summary.add_column(column, justify="left" if column == "profile" else "right")
    result: dict[str, str] = {"instances": str(len(instances))}
    for name in profiles:
        rows = tables[name]
        console.print(instance_table(name, rows))
        counts = verdicts(rows)
        shown = {key: f"{value:.3f}" if isinstance(value, float) else str(value) for key, value in counts.items()}
        summary.add_row(name, *shown.values())
        result |= {f"{name}_{key}": value for key, value in shown.items()}
    console.print(summary)
    print("RESULT " + " ".join(f"{key}={value}" for key, value in result.items()))


if __name__ == "__main__":
    typer.run(main)
