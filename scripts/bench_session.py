#!/usr/bin/env python
"""Long scripted sessions over real code (the standard library): prompt size, agent machinery time, checkpoint size.

One run plays two sessions of the full agent (local environment, sqlite checkpoints, trajectory after every step) with
a scripted model whose responses are generated here: views of ranges, view_symbol, searches, `sed -n`/`grep` through
bash, edits of which some are then reflected bad and reverted as the alternative, compile checks, grounded references
in every thought. The sessions are 100 and 200 operations long (the same first 99 operations) over a git repository
holding copies of big standard-library modules (a ~4,600- and a ~6,400-line file among them).

(a) prompt size: our prompt per step (the `act` call; also `reflect` + `act`) from the trajectory's model_calls,
    against the full-history prompt a mini-swe-agent-style agent would send after the same operations: the same
    system and task text + every action response + every observation (wrapped as mini-swe-agent does, head+tail
    truncated at 10,000 characters). Anchor: the context size at the last step of real mini-swe-agent trajectories
    in ../shared/data/trajectories/mini-swe-agent/ when present.
(b) machinery per step: wall time between two step events minus the step's model-call time (model_calls[].seconds)
    minus the action's execution time (operations[].duration). "in-process actions" also counts the time of actions
    that run no command (view, view_symbol, edit: file reads and tree-sitter scopes) as machinery.
(c) checkpoint database size (sqlite file + WAL) at steps 50/100/200 of the 200-step session; RESULT has the growth
    from the short session's length to the long one's and both sizes (KiB).
(d) the bill to the shorter session's end, ours (every call) against the full-history agent's (one call per step, its
    prompt the previous one and a turn: a cached re-read but for the turn), characters at a profile's prices (gpt;
    `--prices`, bench_bill.py), which the memory is given as its price: what a user pays, where (a) counts characters.
When the machinery median is above 10 ms (not in --quick) or with --profile, a third 100-step session runs under
cProfile and the top costs are printed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
import yaml
from bench_bill import PROFILES, appended_bill, bill_of, memory_priced
from bench_profile import ThreadProfiler, profile_tables
from bench_session_figures import (
    Session,
    calls_to,
    full_history_chars,
    last_act_prompts,
    machinery_ms,
    ours_act_prompt,
    percentile,
    prompt_sections,
    real_anchor,
    shape,
)
from bench_session_script import (
    PROMPT_MARKS,
    SIZE_MARKS,
    TASK,
    TRAJECTORIES,
    WINDOW,
    make_repo,
    session_script,
)
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.pricing import Price
from llm_ide.run.single import RunEvent, run_task
from llm_ide.run.trajectory import load_trajectory

PORTABLE = True  # bench_old_new runs this script on the old package too (bench_bill.py)


@dataclass(frozen=True)
class Scale:
    """The two sessions' lengths and the steps each figure is read at."""

    short: int = 100
    long: int = 200
    prompt_marks: tuple[int, ...] = PROMPT_MARKS
    size_marks: tuple[int, ...] = SIZE_MARKS
    window: range = WINDOW


QUICK = Scale(20, 40, (5, 10, 20), (10, 20, 40), range(11, 21))


def db_sizes(path: Path) -> tuple[int, int, int]:
    wal = path.with_name(path.name + "-wal")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT length(checkpoint) FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0, row[0] if row else 0


def run_session(
    workdir: Path,
    steps: int,
    seed: int,
    profiler: ThreadProfiler | None = None,
    size_marks: tuple[int, ...] = SIZE_MARKS,
    price: Price = PROFILES["gpt"],
) -> Session:
    name = f"session-{steps}{'-profiled' if profiler else ''}"
    repo = make_repo(workdir / name / "repo")
    script = workdir / name / "script.yaml"
    script.write_text(yaml.safe_dump({"responses": session_script(repo, steps, seed)}, sort_keys=False))
    output = workdir / name / "out"
    database = output / f"{name}.checkpoint.sqlite"
    step_times: dict[int, float] = {}
    sizes: dict[int, tuple[int, int, int, int]] = {}

    def on_event(event: RunEvent) -> None:
        now = time.perf_counter()
        if event.kind == "step":
            step_times[event.step] = now
            if event.step in size_marks:
                sizes[event.step] = (*db_sizes(database), (output / f"{name}.traj.json").stat().st_size)

    overrides = {"agent": {"step_limit": steps + 10, "cost_limit": 0}, "environment": {"tools": []}}
    overrides["memory"] = memory_priced(price)  # the scripted model has none: the memory weighs the bill's
    config = load_config("default", **overrides)
    started = time.perf_counter()
    with profiler or contextlib.nullcontext():
        result = run_task(
            TASK,
            model=f"scripted:{script}",
            settings=config,
            output_dir=output,
            run_id=name,
            repo=repo,
            on_event=on_event,
        )
    seconds = time.perf_counter() - started
    traj = load_trajectory(result.trajectory_path)
    return Session(steps, traj, step_times, sizes, result.exit_status, seconds)


def main(
    seed: Annotated[int, typer.Option(help="Seed of the generated session.")] = 7,
    profile: Annotated[bool, typer.Option(help="Profile a 100-step session even when the machinery is fast.")] = False,
    prices: Annotated[str, typer.Option(help="The price profile billed, and given to the memory.")] = "gpt",
    quick: Annotated[bool, typer.Option(help="Sessions of 20 and 40 steps: what the test suite runs.")] = False,
    keep: Annotated[
        Path | None, typer.Option(help="Keep the sessions (repositories, trajectories, databases).")
    ] = None,
) -> None:
    if prices not in PROFILES:
        raise typer.BadParameter(f"--prices: {', '.join(PROFILES)}, not {prices}")
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="bench-session-")) if keep is None else keep
    workdir.mkdir(parents=True, exist_ok=True)
    templates = load_config("default").templates
    try:
        scale = QUICK if quick else Scale()
        sessions = {
            steps: run_session(workdir, steps, seed, size_marks=scale.size_marks, price=PROFILES[prices])
            for steps in (scale.short, scale.long)
        }
        for session in sessions.values():
            ops = session.traj["operations"]
            bad = sum(1 for op in ops if op["bad_action"])
            console.print(
                f"{session.steps}-step session: {session.exit_status}, {len(ops)} operations ({bad} reflected bad), "
                f"{len(session.traj['model_calls'])} model calls, {len(session.traj['code_context'])} chunks, "
                f"{session.seconds:.1f} s"
            )
            if session.exit_status != "submitted" or len(ops) != session.steps:
                raise typer.Exit(f"the {session.steps}-step session did not play out: {session.exit_status}")

        # (a) prompt size
        hundred = sessions[scale.short].traj
        ours_act, ours_all = last_act_prompts(hundred["model_calls"])
        full = full_history_chars(hundred, templates)
        table = Table(
            title="(a) prompt size per step (characters): ours vs a full-history (mini-swe-agent-style) agent"
        )
        for column in ("step", "ours: act", "ours: reflect+act", "full history", "act / full", "(reflect+act) / full"):
            table.add_column(column, justify="right")
        for step in scale.prompt_marks:
            table.add_row(
                str(step),
                f"{ours_act[step]:,}",
                f"{ours_all[step]:,}",
                f"{full[step]:,}",
                f"{ours_act[step] / full[step]:.3f}",
                f"{ours_all[step] / full[step]:.3f}",
            )
        console.print(table)
        observations = [len(op["observation"]) for op in hundred["operations"]]
        thoughts = [len(op["thought"]) for op in hundred["operations"]]
        sections = ", ".join(f"{k} {v:,}" for k, v in prompt_sections(ours_act_prompt(hundred, scale.short)).items())
        console.print(f"our act prompt at step {scale.short} by section (chars): {sections}")
        console.print(f"session shape: {shape(thoughts, observations)}")
        anchor, real_thoughts, real_observations = real_anchor()
        if anchor:
            console.print(f"real mini-swe-agent shape: {shape(real_thoughts, real_observations)}")
            table = Table(title=f"anchor: real mini-swe-agent trajectories ({TRAJECTORIES})")
            for column in ("instance", "model calls", "context at last step (chars)"):
                table.add_column(column, justify="left" if column == "instance" else "right")
            for instance, calls, chars in anchor:
                table.add_row(instance, str(calls), f"{chars:,}")
            median_chars = statistics.median(chars for _, _, chars in anchor)
            table.add_row("median", f"{statistics.median(c for _, c, _ in anchor):.0f}", f"{median_chars:,.0f}")
            console.print(table)
        elif os.environ.get("CI"):
            raise SystemExit(f"CI is set but {TRAJECTORIES} holds no trajectories (../shared must be beside the clone)")
        else:
            median_chars = 0
            console.print(f"anchor: {TRAJECTORIES} is absent; no real-trajectory figure")

        # (b) machinery
        strict: list[float] = []
        in_process: list[float] = []
        window_strict: list[float] = []
        window_in_process: list[float] = []
        for session in sessions.values():
            s, p = machinery_ms(session)
            strict += s.values()
            in_process += p.values()
            window_strict += [s[step] for step in scale.window if step in s]
            window_in_process += [p[step] for step in scale.window if step in p]
        table = Table(title="(b) agent machinery per step (ms): wall − model call − action execution")
        for column in ("steps", "samples", "median", "p95", "median, in-process actions", "p95, in-process actions"):
            table.add_column(column, justify="right")
        for label, values, extra in (
            (f"{scale.window.start}–{scale.window.stop - 1}", window_strict, window_in_process),
            ("all", strict, in_process),
        ):
            table.add_row(
                label,
                str(len(values)),
                f"{statistics.median(values):.1f}",
                f"{percentile(values, 0.95):.1f}",
                f"{statistics.median(extra):.1f}",
                f"{percentile(extra, 0.95):.1f}",
            )
        console.print(table)
        p50 = statistics.median(window_strict)

        # (c) checkpoint size
        long = sessions[scale.long]
        table = Table(
            title=f"(c) checkpoint database (sqlite, bytes) of the {scale.long}-step session, and the trajectory"
        )
        for column in ("step", "db file", "WAL", "db + WAL", "latest checkpoint", "trajectory JSON"):
            table.add_column(column, justify="right")
        for step in scale.size_marks:
            db, wal, blob, traj = long.sizes[step]
            table.add_row(str(step), f"{db:,}", f"{wal:,}", f"{db + wal:,}", f"{blob:,}", f"{traj:,}")
        console.print(table)
        growth = sum(long.sizes[scale.long][:2]) / sum(long.sizes[scale.short][:2])
        held = {step: sum(long.sizes[step][:2]) / 1024 for step in (scale.short, scale.long)}  # db + WAL, KiB

        if profile or (p50 > 10 and not quick):  # a quick run's machinery time is read by no one
            profiler = ThreadProfiler()
            run_session(workdir, scale.short, seed, profiler, scale.size_marks, PROFILES[prices])
            for table in profile_tables(profiler.stats(), scale.short):
                console.print(table)

        anchor_note = f" anchor_mini_context_median={median_chars:.0f}" if anchor else ""
        short = scale.short
        acts = [len(call["response"]) for call in hundred["model_calls"] if call["kind"] == "act"]
        ours_bill = bill_of(calls_to(hundred["model_calls"], short), PROFILES[prices])[1]
        full_bill = appended_bill([full[step] for step in range(1, short + 1)], acts[:short], PROFILES[prices])
        console.print(
            f"bill to step {short} (characters, {prices} profile): ours {ours_bill:,.0f}, full history {full_bill:,.0f}"
        )
        print(
            f"RESULT prompt_ratio_{short}={ours_act[short] / full[short]:.3f} "
            f"bill_ratio_{short}={ours_bill / full_bill:.3f} bill_{short}={ours_bill:.0f} "
            f"full_history_bill_{short}={full_bill:.0f} "
            f"prompt_ratio_{short}_reflect_act={ours_all[short] / full[short]:.3f} machinery_ms_p50={p50:.1f} "
            f"machinery_ms_p95={percentile(window_strict, 0.95):.1f} "
            f"checkpoint_growth_{scale.long}_{short}={growth:.2f} "
            f"checkpoint_kb_{short}={held[short]:.0f} checkpoint_kb_{scale.long}={held[scale.long]:.0f}"
            f"{anchor_note}"
        )
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    typer.run(main)
