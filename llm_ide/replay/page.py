"""The replayed run's inspector page, with the replay's figures and misses (`llm-ide replay --html`)."""

from __future__ import annotations

from pathlib import Path

from llm_ide.inspector.load import load_run
from llm_ide.inspector.model import ReplayView
from llm_ide.inspector.page import run_page, write_page
from llm_ide.replay.model import ReplayReport
from llm_ide.replay.report import totals_rows


def write_replay_page(report: ReplayReport, out: Path) -> Path:
    """`out/<run id>.html`: the page `llm-ide inspect --html` draws for the replayed run, and the replay's section."""
    trajectory = Path(report.run_trajectory)
    run = load_run(trajectory)
    run.replay = ReplayView(
        source=Path(report.trajectory).name,
        figures=[row for row in totals_rows(report) if any(row)],
        misses=[(miss.step, miss.agent, miss.kind, miss.what) for miss in report.misses],
    )
    return write_page(run_page(run), out / trajectory.name.replace(".traj.json", ".html"))
