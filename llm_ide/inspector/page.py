"""RunView / BatchView → one self-contained HTML page (inline CSS, JS and SVG; no network)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from llm_ide.errors import UsageError
from llm_ide.fileio import atomic_write
from llm_ide.inspector.layout import layout
from llm_ide.inspector.load import BEFORE_STEPS
from llm_ide.inspector.model import BatchView, RunView, StepStat
from llm_ide.terminal import plural

CHART_HEIGHT = 90
BAR = 6
HEAT_CELL = 9


@cache
def environment() -> Environment:
    """HTML needs autoescaping, which the prompt templates must not have: the one Jinja environment for pages."""
    pages = Environment(
        loader=PackageLoader("llm_ide.inspector", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    pages.filters["tojson"] = lambda value: Markup(script_json(value))  # the one way data enters a page's script
    pages.filters["plural"] = plural  # `{{ n|plural("call") }}`: 1 call, 2 calls
    return pages


# what HTML's script parser reacts to (`</script>`, `<!--`), and the line separators old JS parsers refuse: escaped
# as JSON escapes, which JSON.parse reads back as the same characters (Jinja's `tojson`, Django's `json_script`)
SCRIPT_ESCAPES = str.maketrans({char: f"\\u{ord(char):04x}" for char in "<>&\u2028\u2029"})


def script_json(value: Any) -> str:
    """JSON to embed in a page's <script> element: any text in it round-trips through JSON.parse."""
    return json.dumps(value, ensure_ascii=False).translate(SCRIPT_ESCAPES)


def intern_lines(texts: list[str]) -> tuple[list[str], list[list[int]]]:
    """Prompts repeat most of their lines from call to call: each distinct line is stored once, and each text becomes
    runs of consecutive line numbers, flattened as [first, count, first, count, …] (a 300-step run: 12 MB → 2 MB)."""
    table: dict[str, int] = {}
    encoded = []
    for text in texts:
        runs: list[int] = []
        for line in text.split("\n"):
            number = table.setdefault(line, len(table))
            if runs and runs[-2] + runs[-1] == number:
                runs[-1] += 1
            else:
                runs += [number, 1]
        encoded.append(runs)
    return list(table), encoded


def run_page(run: RunView) -> str:
    tree = layout(run.nodes)
    lines, texts = intern_lines([text for call in run.calls for text in (call.prompt, call.response)])
    calls = {  # by position: a discarded call has the index of the one that replaced it
        str(i): {**call.model_dump(exclude={"prompt", "response"}), "text": texts[2 * i : 2 * i + 2]}
        for i, call in enumerate(run.calls)
    }
    data = {
        "nodes": {f"{n.attempt}:{n.id}": n.model_dump() for n in run.nodes},
        "chunks": [{"file": h.file_path, "lines": h.lines, "scores": h.scores, "shown": h.shown} for h in run.heat],
        "cell": HEAT_CELL,
        "priced": run.priced,
        "before": [position for position, call in enumerate(run.calls) if call.kind in BEFORE_STEPS],
    }
    return (
        environment()
        .get_template("run.html.j2")
        .render(
            run=run,
            tree=tree,
            charts=charts(run.steps, run.priced),
            heat_cell=HEAT_CELL,
            patch_lines=[diff_class(line) for line in run.patch.splitlines()],
            data=data,
            call_data={"lines": lines, "calls": calls},
            before={what: sum(call.kind == kind for call in run.calls) for kind, what in BEFORE_STEPS.items()},
        )
    )


def charts(steps: list[StepStat], priced: bool = True) -> list[dict[str, Any]]:
    """Per-step bars: prompt characters, tokens (cached part stacked under the uncached part), cost (a run without a
    price has no cost to draw)."""
    specs = [
        ("prompt characters", [(s.prompt_chars, 0) for s in steps], "{:,.0f}"),
        ("input tokens: cached | uncached", [(s.uncached_tokens, s.cached_tokens) for s in steps], "{:,.0f}"),
        *([("cost ($)", [(s.cost, 0) for s in steps], "{:.4f}")] if priced else []),
    ]
    out = []
    for title, values, fmt in specs:
        largest = max((a + b for a, b in values), default=0)
        top = largest or 1  # (all zero: flat bars)
        bars = [
            {
                "x": i * BAR,
                "step": steps[i].step,
                "cached": b / top * CHART_HEIGHT,
                "uncached": a / top * CHART_HEIGHT,
                "tip": f"{steps[i].label}: " + (fmt.format(a) if not b else f"{b:,} cached, {a:,} uncached"),
            }
            for i, (a, b) in enumerate(values)
        ]
        out.append({"title": title, "bars": bars, "max": fmt.format(largest), "width": max(len(values), 1) * BAR})
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


def page_path(out: Path) -> Path:
    """`out`, where a page may go: a UsageError (one line) when a file on its way is no folder, or when a file that
    is not an HTML page is there (`inspect RUN.traj.json --html RUN.traj.json` wrote the page over the trajectory)."""
    blocker = next((folder for folder in reversed(out.parents) if folder.exists() and not folder.is_dir()), None)
    if blocker is not None:
        raise UsageError(f"cannot write the page {out}: {blocker} is a file, not a folder")
    if out.is_file() and out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"cannot write the page {out}: a file that is no HTML page is there (give an .html name)")
    return out


def write_page(html: str, out: Path) -> Path:
    """The page written at `out` (its folder made); a path that cannot be written is a UsageError (one line)."""
    page_path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, html)
    except OSError as error:
        raise UsageError(f"cannot write the page {out}: {error.strerror or error}") from None
    return out
