#!/usr/bin/env python
"""Code-context renderer vs grep-ast's TreeContext on real standard-library files, side by side in one run.

For each file the same 30 spread lines of interest are rendered by both:
- cold: a fresh CodeView / a new TreeContext, file read and parse included;
- warm: our parse cache warm (the render still re-reads the file and checks it is unchanged); for grep-ast, an existing
  TreeContext re-rendering (lines of interest + add_context + format).
Then one agent step of context machinery at n_operations=1000 with 200 chunks: rescore, select, chunk sizes,
budget trim and render (warm cache, as between steps).
grep-ast is configured as close to SPEC §4 as it allows: parent scopes only, line numbers, no padding/margins.
--quick: the four named files (not the largest one), one cold round, two warm ones.
"""

from __future__ import annotations

import os
import random
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

import typer
from grep_ast import TreeContext
from rich.console import Console
from rich.table import Table

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.config import load_config
from llm_ide.state.context import Activity, Chunk, ScoreParams, rescore
from llm_ide.state.selection import select_chunks, trim_to_budget

TIMED = ("cold_ratio", "warm_ratio", "warm_reread_ratio")  # ratios of two timings (bench_old_new)
STDLIB = Path(sysconfig.get_paths()["stdlib"])
NAMED = ["argparse.py", "typing.py", "email/_header_value_parser.py", "_pydecimal.py"]


def largest_stdlib_file() -> str:
    """(Walked with os.walk: `rglob` took a second of CPU, a test's quick run a third of its own.)"""
    sizes: dict[Path, int] = {}
    for root, folders, names in os.walk(STDLIB):
        folders[:] = [name for name in folders if name != "site-packages"]
        sizes |= {path: path.stat().st_size for path in (Path(root, name) for name in names if name.endswith(".py"))}
    return max(sizes, key=sizes.__getitem__).relative_to(STDLIB).as_posix()


def spread_lines(count: int, n: int = 30) -> list[int]:
    return sorted({1 + i * (count - 1) // (n - 1) for i in range(n)})


def timed(functions: list[Callable[[], object]], repeat: int) -> list[tuple[float, float]]:
    """(best, median) wall time in milliseconds of each function, run interleaved so they share the machine's load."""
    samples: list[list[float]] = [[] for _ in functions]
    for _ in range(repeat):
        for function, times in zip(functions, samples, strict=True):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
    return [(min(times) * 1000, statistics.median(times) * 1000) for times in samples]


def grep_ast_context(path: str, code: str) -> TreeContext:
    return TreeContext(
        path,
        code,
        line_number=True,
        parent_context=True,
        child_context=False,
        last_line=False,
        margin=0,
        mark_lois=False,
        loi_pad=0,
    )


def grep_ast_render(context: TreeContext, lines: list[int]) -> str:
    context.lines_of_interest = set()
    context.add_lines_of_interest(line - 1 for line in lines)
    context.add_context()
    return context.format()


def ours_cold(path: str, lines: list[int]) -> str:
    return CodeView(LocalFiles(STDLIB)).render([Chunk(path, lines)])


def grep_ast_cold(path: str, lines: list[int]) -> str:
    code = (STDLIB / path).read_text(encoding="utf-8")
    return grep_ast_render(grep_ast_context(path, code), lines)


def step_chunks(view: CodeView, files: list[str], count: int, n_operations: int, seed: int = 7) -> list[Chunk]:
    """`count` chunks (a tenth whole functions) spread over `files`, with random activity over `n_operations`."""
    rng = random.Random(seed)
    chunks = []
    for k in range(count):
        path = files[k % len(files)]
        total = view.line_count(path)
        start = rng.randint(1, max(1, total - 8))
        scope = view.scopes(path, range(start, start + rng.randint(1, 6)))[0]
        whole = k % 10 == 0 and scope.function
        accessed = [1 if rng.random() < 0.02 else 0 for _ in range(n_operations)]
        referred = [rng.choice((0, 0, 0, 0, 0, 0, 1, 2)) for _ in range(n_operations)]
        chunks.append(
            Chunk(path, list(scope.lines), scope.class_name, scope.function, bool(whole), Activity(accessed, referred))
        )
    chunks[-1].activity.accessed[-1] = 1
    return chunks


def context_step(view: CodeView, chunks: list[Chunk], n_operations: int, params: ScoreParams, budget: int) -> str:
    """What the agent does for the code context at every step (llm_ide/nodes/render_context.py)."""
    rescore(chunks, n_operations, params)
    shown = select_chunks(chunks, params)
    shown = trim_to_budget(shown, view.sizes(shown), budget)
    return view.render(shown)


def main(
    repeat: int = typer.Option(15, help="Cold repetitions per file"),
    warm_repeat: int = typer.Option(200, help="Warm repetitions per file"),
    quick: bool = typer.Option(False, help="Small sizes, the same comparison: what the test suite runs."),
) -> None:
    if quick:  # the named files: the largest one (pydoc's topics) costs a test's run 2 s of its 3
        repeat, warm_repeat = 1, 2
    console = Console(width=160)
    files = NAMED if quick else [*NAMED, largest_stdlib_file()]
    table = Table(title="Code context, 30 lines of interest per file: best of N, ms")
    columns = ["file", "lines", "rows ours/grep", "ours cold", "grep-ast cold", "cold ratio"]
    columns += ["ours warm", "+ re-read", "grep-ast warm", "warm ratio", "ratio w/ re-read"]
    for column in columns:
        table.add_column(column, justify="left" if column == "file" else "right")
    keys = ("ours_cold", "grep_cold", "ours_warm", "ours_reread", "grep_warm")
    best = dict.fromkeys(keys, 0.0)
    median = dict.fromkeys(keys, 0.0)
    for path in files:
        code = (STDLIB / path).read_text(encoding="utf-8")
        lines = spread_lines(code.count("\n"))
        view = CodeView(LocalFiles(STDLIB))
        context = grep_ast_context(path, code)
        ours_text, grep_text = view.render([Chunk(path, lines)]), grep_ast_render(context, lines)
        cold = timed([lambda: ours_cold(path, lines), lambda: grep_ast_cold(path, lines)], repeat)  # noqa: B023
        warm = timed(
            [
                lambda: view.render([Chunk(path, lines)], reread=False),  # noqa: B023
                lambda: view.render([Chunk(path, lines)]),  # noqa: B023
                lambda: grep_ast_render(context, lines),  # noqa: B023
            ],
            warm_repeat,
        )
        row = dict(zip(keys, cold + warm, strict=True))
        for key, (fastest, middle) in row.items():
            best[key] += fastest
            median[key] += middle
        table.add_row(*_cells(path, code.count("\n"), f"{ours_text.count(chr(10))}/{grep_text.count(chr(10))}", row))
    table.add_row(*_cells("all files", 0, "", {key: (best[key], median[key]) for key in keys}))
    console.print(table)
    cold_ratio = best["ours_cold"] / best["grep_cold"]
    warm_ratio = best["ours_warm"] / best["grep_warm"]
    reread_ratio = best["ours_reread"] / best["grep_warm"]
    console.print(
        "warm: our parse cache warm, rendering from the snapshot (like grep-ast re-rendering an existing TreeContext,"
        " no file I/O); '+ re-read' is what every agent render does: read the file again and check it is unchanged.\n"
        f"ratios of medians: cold {median['ours_cold'] / median['grep_cold']:.3f},"
        f" warm {median['ours_warm'] / median['grep_warm']:.4f},"
        f" warm with re-read {median['ours_reread'] / median['grep_warm']:.4f}"
    )

    memory = load_config("default").memory
    params = ScoreParams(memory.alpha, memory.beta, memory.gamma, memory.threshold)
    budget = memory.context_budget_chars
    n_operations = 1000
    view = CodeView(LocalFiles(STDLIB))
    chunks = step_chunks(view, files, 200, n_operations)
    text = context_step(view, chunks, n_operations, params, budget)
    shown = select_chunks(chunks, params)
    (score, render_all, sizes, step_ms) = timed(
        [
            lambda: rescore(chunks, n_operations, params),
            lambda: view.render(chunks),
            lambda: [view.chunk_size(chunk) for chunk in shown],
            lambda: context_step(view, chunks, n_operations, params, budget),
        ],
        warm_repeat if quick else max(20, warm_repeat // 5),
    )
    step = Table(
        title=f"One agent step: 200 chunks over {len(files)} files, n_operations={n_operations}: best (median) ms"
    )
    for column in ("rescore", "render all 200", f"chunk_size x{len(shown)}", "whole step", "rendered chars"):
        step.add_column(column, justify="right")
    step.add_row(
        *(f"{best:.2f} ({median:.2f})" for best, median in (score, render_all, sizes, step_ms)), str(len(text))
    )
    console.print(step)
    console.print(
        "whole step = rescore + select_chunks + chunk_size of each + trim_to_budget + render (as render_context)"
    )
    print(
        f"RESULT cold_ratio={cold_ratio:.3f} warm_ratio={warm_ratio:.4f} warm_reread_ratio={reread_ratio:.4f}"
        f" score_render_ms={step_ms[0]:.2f}"
    )


def _cells(path: str, line_count: int, rows: str, row: dict[str, tuple[float, float]]) -> list[str]:
    best = {key: value[0] for key, value in row.items()}
    return [
        path,
        str(line_count or ""),
        rows,
        f"{best['ours_cold']:.2f}",
        f"{best['grep_cold']:.2f}",
        f"{best['ours_cold'] / best['grep_cold']:.3f}",
        f"{best['ours_warm']:.3f}",
        f"{best['ours_reread']:.3f}",
        f"{best['grep_warm']:.3f}",
        f"{best['ours_warm'] / best['grep_warm']:.4f}",
        f"{best['ours_reread'] / best['grep_warm']:.4f}",
    ]


if __name__ == "__main__":
    typer.run(main)
