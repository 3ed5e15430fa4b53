"""`llm-ide inspect --html`, `llm-ide report` and `llm-ide graph`: runs and batches drawn for people."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from llm_ide.cli.console import console, err_console, fail, print_whole
from llm_ide.errors import ExitStatus
from llm_ide.terminal import plural


def page_in(out: str, named: str) -> Path:
    """`out`, or `named` in it when it is a folder: one there, or a path ending in `/` (made when missing)."""
    path = Path(out)
    return path / named if out.endswith(("/", os.sep)) or path.is_dir() else path


def html_page_path(trajectory: Path, out: str | None) -> Path:
    """`out`; a folder: the page named after the run in it; none: beside the trajectory."""
    named = trajectory.name.removesuffix(".traj.json") + ".html"
    return trajectory.with_name(named) if out is None else page_in(out, named)


def write_inspector_page(trajectory: Path, out: str | None) -> None:
    """The inspector page of one trajectory (llm-ide's or mini-swe-agent's)."""
    from llm_ide.inspector.load import TrajectoryError, load_run
    from llm_ide.inspector.page import run_page, write_page

    if not trajectory.is_file():
        raise fail(f"trajectory not found: {trajectory}")
    try:
        run = load_run(trajectory)
    except TrajectoryError as error:
        raise fail(str(error)) from None
    for note in run.notes:
        err_console.print(f"warning: {note}", markup=False)
    page = write_page(run_page(run), html_page_path(trajectory, out))
    discarded = sum(bool(call.discarded) for call in run.calls)
    counts = f"{plural(len(run.nodes), 'operation')}, {plural(len(run.calls) - discarded, 'model call')}"
    counts += f" (+{discarded} discarded)" if discarded else ""
    console.print(f"{counts} → {page} ({page.stat().st_size:,} bytes)")


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A SWE-bench batch folder (the --output of `llm-ide swebench`).")],
    html: Annotated[
        str | None,
        typer.Option(
            "--html",
            metavar="<path>",
            help="Write an HTML report here (a folder: report.html in it), with one inspector page per instance "
            "beside it.",
            show_default="no",
        ),
    ] = None,
    evaluation: Annotated[
        Path | None,
        typer.Option(
            "--eval", help="The evaluation report.", show_default="the newest report.json or harness summary in it"
        ),
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only rows with this exit status.", show_default="all")
    ] = None,
    resolved: Annotated[
        bool | None,
        typer.Option("--resolved/--unresolved", help="Only resolved (or unresolved) rows.", show_default="both"),
    ] = None,
) -> None:
    """One row per instance: exit status, steps, cost and whether the evaluation resolved it; with totals."""
    from llm_ide.inspector.page import page_path, report_page, write_page
    from llm_ide.inspector.report import ReportError, load_batch, write_instance_pages

    if run_dir.is_file():
        raise fail(f"{run_dir} is a file: give a batch's folder (one run's trajectory: llm-ide inspect {run_dir})")
    if not run_dir.is_dir():
        raise fail(f"batch folder not found: {run_dir}")
    if status is not None and status not in set(ExitStatus):
        raise fail(f"--status {status}: not an exit status; one of {', '.join(ExitStatus)}")
    try:
        batch, trajectories = load_batch(run_dir, evaluation)
    except ReportError as error:
        raise fail(str(error)) from None
    if resolved is not None and not batch.evaluated:
        wanted = "--resolved" if resolved else "--unresolved"
        raise fail(f"{wanted}: no evaluation of {run_dir} found (llm-ide evaluate {run_dir / 'preds.json'}, or --eval)")
    rows = [row for row in batch.rows if status in (None, row.exit_status) and resolved in (None, row.resolved)]
    shown = batch.model_copy(update={"rows": rows})
    if html is not None:
        page = page_path(page_in(html, "report.html"))  # as `inspect --html FOLDER` takes a folder; checked first
        problems = write_instance_pages(shown, trajectories, page.parent / f"{page.stem}_pages", page.parent)
        for problem in problems:
            err_console.print(f"[yellow]warning:[/] {escape(problem)}")
        write_page(report_page(shown), page)
        pages = sum(row.instance_id in trajectories for row in rows) - len(problems)
        counted = f"{len(rows)} of {plural(len(batch.rows), 'instance')}"
        console.print(f"{counted} → {page} (+ {plural(pages, 'inspector page')})")
        return
    print_report(shown, len(batch.rows))


def print_report(batch: Any, instances: int) -> None:
    """The rows shown, one per instance, then their totals (of the batch's `instances`)."""
    table = Table("instance", "exit status", "steps", "cost", "resolved", "evaluation error", title=batch.title)
    for row in batch.rows:
        error = (row.error or "error") if row.evaluation == "error" else ""
        resolved_cell = "—" if row.evaluation == "error" else row.verdict
        table.add_row(row.instance_id, row.exit_status, str(row.steps), row.spent, resolved_cell, error)
    print_whole(table)
    totals = batch.totals()
    graded = ""
    if totals["resolved"] is not None:
        counts = f"{totals['resolved']} resolved, {totals['unresolved']} not resolved"
        graded = f", {counts}, {plural(totals['errors'], 'evaluation error')}"
    shown = f"{totals['instances']} of {plural(instances, 'instance')} shown"
    console.print(f"{shown}; their total {plural(totals['steps'], 'step')}, {totals['spent']}{graded}")


def graph_command(
    name: Annotated[
        str,
        typer.Argument(help="Which graph: agent, coop (a pair), coop-planning, attempts, navigator or reproduction."),
    ] = "agent",
    mermaid: Annotated[bool, typer.Option("--mermaid", help="A Mermaid diagram (the one format offered).")] = True,
) -> None:
    """Print a state machine as LangGraph Studio draws it."""
    from llm_ide.attempts.graph import build_attempts_graph
    from llm_ide.coop.pair import build_pair_graph
    from llm_ide.coop.planning import build_planning_graph
    from llm_ide.graph import build_graph
    from llm_ide.navigator.variant import Navigator
    from llm_ide.reproduction.variant import Reproduction
    from llm_ide.variant import Variants

    graphs = {
        "agent": build_graph,
        "coop": build_pair_graph,
        "coop-planning": build_planning_graph,
        "attempts": build_attempts_graph,
        "navigator": lambda: build_graph(variants=Variants((Navigator(),))),
        "reproduction": lambda: build_graph(variants=Variants((Reproduction(),))),
    }
    if name not in graphs:
        raise fail(f"unknown graph {name!r}: choose one of {', '.join(graphs)}")
    typer.echo(graphs[name]().get_graph(xray=True).draw_mermaid())
