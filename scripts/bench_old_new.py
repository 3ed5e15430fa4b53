#!/usr/bin/env python
"""Old against new in one run (issue 39 point 8): each benchmark's quick mode on two checkouts, their RESULT keys side
by side.

`python scripts/bench_old_new.py --old /tmp/old39` runs `scripts/bench_X.py --quick` of the old checkout with the old
package (PYTHONPATH) and of this one with this one's, one benchmark at a time, in this interpreter (one venv: the old
checkout gets no install of its own). `--old` may be a revision instead (by default 0922c50, issue 39's "before"):
it is unpacked with `git archive` into a temporary folder, `../shared` beside it. A key is `same` when both print the
same value, `timing` when the benchmark declares it one (a module-level `TIMED` tuple of key patterns, read from
either side's script without running it: ratios of two timings such as bench_context's `cold_ratio`) or its name says
it is a time or a rate (never equal twice: shown, not judged), else `differs` (the ratio new/old when both are
numbers); an old key the new side prints per price profile is compared with its `gpt_` one (the old benchmarks
billed gpt's prices). A benchmark that declares `PORTABLE = True` runs the new checkout's script on both packages: the
same measurement of each (bench_bill.py prices a run for either), so a bench that measured wrongly is fixed for both
sides and the figures it added have an old value. A benchmark only one side has, or one that fails on a side, is
listed as such. `--only` picks benchmarks, `--skip` leaves some out. The last line is `RESULT`.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parents[1]
TIMING = re.compile(r"(^|_)(s|ms|us|seconds|secs|sec|time|times|wall|cpu|elapsed|per_s|per_sec|rate|speedup|x)(_|$)")
TIMING_WORDS = ("seconds", "_ms", "_s_", "wall", "cpu", "per_step", "speed", "throughput", "latency")


@dataclass
class Outcome:
    """One side's quick run of one benchmark: its RESULT keys, or why it has none."""

    figures: dict[str, str] = field(default_factory=dict)
    problem: str = ""
    seconds: float = 0.0


@contextmanager
def checkout(old: str, new: Path) -> Iterator[Path]:
    """The old checkout: a folder as it is, or a revision of this repository unpacked (with `../shared` beside it)."""
    if Path(old).is_dir():
        yield Path(old).resolve()
        return
    folder = Path(tempfile.mkdtemp(prefix="bench-old-new-"))
    try:
        archive = subprocess.run(["git", "-C", str(new), "archive", old], capture_output=True)
        if archive.returncode:
            raise SystemExit(f"{old}: neither a folder nor a revision of {new}")
        (folder / "old").mkdir()
        subprocess.run(["tar", "-x", "-C", str(folder / "old")], input=archive.stdout, check=True)
        if (new.parent / "shared").exists():
            (folder / "shared").symlink_to((new.parent / "shared").resolve())
        yield folder / "old"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def benchmarks(root: Path) -> set[str]:
    scripts = root / "scripts"
    """The checkout's benchmarks, but the old-against-new ones themselves (bench_old_new_replays: the 36 replays)."""
    found = {path.stem for path in scripts.glob("bench_*.py") if "typer.run(main)" in path.read_text()}
    return {name for name in found if not name.startswith("bench_old_new")}


def run_quick(root: Path, name: str, timeout: float, scripts: Path | None = None) -> Outcome:
    """`scripts/<name>.py --quick` of the checkout at `root` (or of the `scripts` folder given), with that checkout's
    package first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, f"{name}.py", "--quick"],
            cwd=scripts or root / "scripts",
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Outcome(problem=f"timed out after {timeout:.0f} s", seconds=timeout)
    seconds = time.monotonic() - started
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("RESULT "):
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-1:])[:160]
        return Outcome(problem=f"exit {done.returncode}: {tail}", seconds=seconds)
    pairs = (pair.split("=", 1) for pair in lines[-1].split()[1:] if "=" in pair)
    return Outcome(figures=dict(pairs), seconds=seconds)


def declared(script: Path, name: str, default: Any = None) -> Any:
    """A literal a benchmark declares at module level (`TIMED = (...)`, `PORTABLE = True`), read with `ast`: the
    script is not imported (its checkout's package may not be the one on the path)."""
    if not script.is_file():
        return default
    for statement in ast.parse(script.read_text()).body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in statement.targets
        ):
            return ast.literal_eval(statement.value)
    return default


def declared_timing(script: Path) -> tuple[str, ...]:
    """The key patterns a benchmark declares timings (`TIMED`, fnmatch patterns)."""
    return tuple(declared(script, "TIMED", ()))


def is_timing(key: str, declared: tuple[str, ...] = ()) -> bool:
    return (
        any(fnmatchcase(key, pattern) for pattern in declared)
        or bool(TIMING.search(key))
        or any(word in f"_{key}_" for word in TIMING_WORDS)
    )


def number(value: str) -> float | None:
    try:
        return float(value.rstrip("%x"))
    except ValueError:
        return None


def paired(old: dict[str, str], new: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The old figures under the new names: a key the old side printed for its one price list (gpt's: 1 / 0.1 / 8)
    is the new side's `gpt_<key>` once benchmarks bill each price profile."""
    renamed = {f"gpt_{key}" if key not in new and f"gpt_{key}" in new else key: value for key, value in old.items()}
    return renamed, new


def compare(old: str | None, new: str | None, key: str, declared: tuple[str, ...] = ()) -> str:
    if old is None or new is None:
        return "new only" if old is None else "old only"
    if old == new:
        return "same"
    if is_timing(key, declared):
        return "timing"
    a, b = number(old), number(new)
    return f"differs ×{b / a:.3g}" if a not in (None, 0.0) and b is not None else "differs"


def main(
    old: Annotated[str, typer.Option(help="The old checkout's folder, or a revision to unpack.")] = "0922c50",
    new: Annotated[Path, typer.Option(help="The new checkout.")] = HERE,
    only: Annotated[list[str] | None, typer.Option(help="Only these benchmarks (bench_X).")] = None,
    skip: Annotated[list[str] | None, typer.Option(help="Leave these benchmarks out.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds a side's quick run may take.")] = 1500.0,
    quick: Annotated[bool, typer.Option(help="bench_attempts only: what a test can afford.")] = False,
) -> None:
    with checkout(old, new.resolve()) as root:
        compared(root, new.resolve(), only, skip, timeout, quick)


def compared(old: Path, new: Path, only: list[str] | None, skip: list[str] | None, timeout: float, quick: bool) -> None:
    console = Console(width=140)
    names = sorted(benchmarks(old) | benchmarks(new))
    if unknown := sorted(set(only or []) - set(names)):
        raise SystemExit(f"--only {' '.join(unknown)}: no such benchmark on either side (e.g. bench_sampling)")
    if quick:
        names = ["bench_attempts"]
    names = [n for n in names if (not only or n in only) and n not in (skip or [])]
    table = Table(title=f"quick RESULTs: old {old} against new {new}")
    for column in ("benchmark", "key", "old", "new", "verdict"):
        table.add_column(column)
    counts = {"same": 0, "timing": 0, "differs": 0, "one_side": 0}
    failed: list[str] = []
    for name in names:
        portable = declared(new / "scripts" / f"{name}.py", "PORTABLE", False)
        sides = {}
        for label, root in (("old", old), ("new", new)):
            scripts = new / "scripts" if portable else root / "scripts"
            present = (scripts / f"{name}.py").is_file()
            sides[label] = run_quick(root, name, timeout, scripts) if present else Outcome(problem="no such benchmark")
            how = " (the new script)" if portable else ""
            console.print(f"{name} {label}{how}: {sides[label].problem or 'ok'} ({sides[label].seconds:.0f} s)")
        for label, outcome in sides.items():
            if outcome.problem:
                table.add_row(
                    name, "—", *(("(" + outcome.problem + ")", "") if label == "old" else ("", outcome.problem))
                )
                failed.append(f"{name}:{label}")
        old_figures, new_figures = paired(sides["old"].figures, sides["new"].figures)
        timed = (*declared_timing(old / "scripts" / f"{name}.py"), *declared_timing(new / "scripts" / f"{name}.py"))
        for key in dict.fromkeys([*old_figures, *new_figures]):
            a, b = old_figures.get(key), new_figures.get(key)
            verdict = compare(a, b, key, timed)
            counts["one_side" if verdict.endswith("only") else verdict.split()[0]] += 1
            table.add_row(name, key, a or "", b or "", verdict)
    console.print(table)
    figures = {"benchmarks": len(names), "failed": ",".join(failed) or "none", **counts}
    print("RESULT " + " ".join(f"{key}={value}" for key, value in figures.items()))


if __name__ == "__main__":
    typer.run(main)
