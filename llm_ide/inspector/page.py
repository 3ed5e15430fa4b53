"""RunView / BatchView → one self-contained HTML page (inline CSS, JS and SVG; no network)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from llm_ide.inspector.layout import layout
from llm_ide.inspector.model import BatchView, RunView, StepStat

CHART_HEIGHT = 90
BAR = 6
HEAT_CELL = 9


@cache
def environment() -> Environment:
    """HTML needs autoescaping, which the prompt templates must not have: the one Jinja environment for pages."""
    return Environment(
        loader=PackageLoader("llm_ide.inspector", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def script_json(value: Any) -> str:
    """JSON safe inside <script>: no `</script>` can close the element early."""
    return json.dumps(value, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def run_page(run: RunView) -> str:
    tree = layout(run.nodes)
    data = {
        "nodes": {f"{n.attempt}:{n.id}": n.model_dump() for n in run.nodes},
        "calls": {str(c.index): c.model_dump() for c in run.calls},
        "chunks": [{"file": h.file_path, "lines": h.lines} for h in run.heat],
    }
    return (
        environment()
        .get_template("run.html.j2")
        .render(
            run=run,
            tree=tree,
            charts=charts(run.steps),
            heat_cell=HEAT_CELL,
            patch_lines=[diff_class(line) for line in run.patch.splitlines()],
            data_json=script_json(data),
        )
    )


def charts(steps: list[StepStat]) -> list[dict[str, Any]]:
    """Per-step bars: prompt characters, tokens (cached part stacked under the uncached part), cost."""
    specs = [
        ("prompt characters", [(s.prompt_chars, 0) for s in steps], "{:,.0f}"),
        ("input tokens: cached | uncached", [(s.uncached_tokens, s.cached_tokens) for s in steps], "{:,.0f}"),
        ("cost ($)", [(s.cost, 0) for s in steps], "{:.4f}"),
    ]
    out = []
    for title, values, fmt in specs:
        top = max((a + b for a, b in values), default=0) or 1
        bars = [
            {
                "x": i * BAR,
                "step": steps[i].step,
                "cached": b / top * CHART_HEIGHT,
                "uncached": a / top * CHART_HEIGHT,
                "tip": f"step {steps[i].step}: " + (fmt.format(a) if not b else f"{b:,} cached, {a:,} uncached"),
            }
            for i, (a, b) in enumerate(values)
        ]
        out.append({"title": title, "bars": bars, "max": fmt.format(top), "width": max(len(values), 1) * BAR})
    return out


def diff_class(line: str) -> tuple[str, str]:
    if line.startswith(("+++", "---", "diff --git", "index ")):
        return "meta", line
    if line.startswith("@@"):
        return "hunk", line
    if line.startswith("+"):
        return "add", line
    if line.startswith("-"):
        return "del", line
    return "ctx", line


def report_page(batch: BatchView) -> str:
    statuses = sorted({row.exit_status for row in batch.rows})
    return environment().get_template("report.html.j2").render(batch=batch, totals=batch.totals(), statuses=statuses)


def write_page(html: str, out: Path) -> Path:
    from llm_ide.run.trajectory import atomic_write

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, html)
    return out
