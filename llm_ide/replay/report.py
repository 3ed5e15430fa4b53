"""A replay's report for people: per step, in total, the misses (rich tables)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llm_ide.replay.formats import LLM_IDE_FORMAT
from llm_ide.replay.model import AGENTS, HISTORY, MARKS, AgentStep, Fraction, ReplayReport
from llm_ide.terminal import terminal_safe


def share(fraction: Fraction) -> str:
    return "–" if fraction.value is None else f"{fraction.present}/{fraction.total}"


def ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def fraction_text(fraction: Fraction) -> str:
    return "–" if fraction.value is None else f"{fraction.value:.2f} ({fraction.present}/{fraction.total})"


def per_edit(figures: AgentStep) -> Fraction:
    return Fraction(total=figures.edits, present=figures.edits_grounded)


def steps_table(report: ReplayReport) -> Table:
    table = Table(title="per step: llm-ide · original (the original's figures rebuilt from its trajectory)")
    columns = ("step", "action", "rc", "calls", "bill", "bill ratio (cum.)", "raw", "uncached", "pre-image", "±3 lines")
    for column in (*columns, "refs"):
        table.add_column(column, justify="left" if column == "action" else "right")
    ours_total = theirs_total = 0.0
    for step in report.steps:
        ours, theirs = step.agents["llm-ide"], step.agents["original"]
        ours_total, theirs_total = ours_total + ours.bill, theirs_total + theirs.bill
        differs = step.original_returncode not in (None, step.returncode)
        codes = f"{step.returncode}" + (f" ({step.original_returncode})" if differs else "")
        table.add_row(
            str(step.step),
            escape(terminal_safe(step.action)[:60]),
            codes,
            f"{ours.calls} · {theirs.calls}",
            f"{ours.bill:,.0f} · {theirs.bill:,.0f}",
            ratio(ours_total / theirs_total if theirs_total else None),
            f"{ours.raw:,} · {theirs.raw:,}",
            f"{ours.uncached:,} · {theirs.uncached:,}",
            f"{share(ours.pre_image)} · {share(theirs.pre_image)}",
            f"{share(ours.context)} · {share(theirs.context)}",
            f"{share(ours.references)} · {share(theirs.references)}",
        )
    return table


def totals_rows(report: ReplayReport) -> list[tuple[str, str, str, str]]:
    """(figure, llm-ide, original, llm-ide / original) for the whole replay; a blank row between bill and fidelity."""
    ours, theirs = (report.totals(agent) for agent in AGENTS)
    prices = report.prices
    figures = {
        "bill": (ours.bill, theirs.bill),
        "input cost (the prompts)": (report.input_cost("llm-ide"), report.input_cost("original")),
        "output cost (the replies)": (ours.output * prices.output, theirs.output * prices.output),
        "raw prompt": (ours.raw, theirs.raw),
        "uncached": (ours.uncached, theirs.uncached),
        "output": (ours.output, theirs.output),
    }
    rows = [(label, f"{a:,.0f}", f"{b:,.0f}", ratio(a / b if b else None)) for label, (a, b) in figures.items()]
    rows.append(
        ("calls", str(ours.calls), str(theirs.calls), ratio(ours.calls / theirs.calls if theirs.calls else None))
    )
    rows += [
        (
            f"bill up to step {mark} (input cost)",
            "",
            "",
            f"{ratio(report.bill_ratio(mark))} ({ratio(report.input_ratio(mark))})",
        )
        for mark in MARKS
        if mark <= len(report.steps)
    ]
    if report.billed(HISTORY):  # the same session for both agents, where the replay's outputs differ
        history = report.totals(HISTORY).bill
        rows.append(("bill of full history on the replay's outputs", "", f"{history:,.0f}", ratio(ours.bill / history)))
        rows += [
            (f"  up to step {mark}", "", "", ratio(report.bill_ratio(mark, HISTORY)))
            for mark in MARKS
            if mark <= len(report.steps)
        ]
    rows.append(("", "", "", ""))
    fidelity = (
        ("edit grounding (pre-image lines)", lambda t: t.pre_image),
        ("edit grounding (per edit)", per_edit),
        ("edit context (±3 lines)", lambda t: t.context),
        ("reference recall", lambda t: t.references),
    )
    for label, pick in fidelity:
        a, b = pick(ours), pick(theirs)
        both = a.value is not None and b.value
        rows.append((label, fraction_text(a), fraction_text(b), ratio(a.value / b.value if both else None)))
    return rows


def totals_table(report: ReplayReport) -> Table:
    prices = report.prices
    title = (
        f"in total ({len(report.steps)} steps, llm-ide's actions as {report.action_format}), in characters; bill = "
        f"{prices.described()}"
    )
    table = Table(title=title)
    for column in ("figure", *AGENTS, "llm-ide / original"):
        table.add_column(column, justify="right")
    for row in totals_rows(report):
        if any(row):
            table.add_row(*row)
        else:
            table.add_section()
    return table


def print_report(report: ReplayReport, console: Console, misses_shown: int = 40, steps: bool = True) -> None:
    if steps:
        console.print(steps_table(report))
    console.print(totals_table(report))
    ours = [miss for miss in report.misses if miss.agent == "llm-ide"]
    theirs = [miss for miss in report.misses if miss.agent == "original"]
    console.print(f"[bold]misses[/]: llm-ide {len(ours)}, original {len(theirs)} (all in replay.json)")
    for miss in (ours + theirs)[:misses_shown]:
        text = escape(terminal_safe(miss.what)[:140])
        console.print(f"  step {miss.step:>3} {miss.agent:<8} {miss.kind:<9} {text}")
    if len(report.misses) > misses_shown:
        console.print(f"  … and {len(report.misses) - misses_shown} more")
    notes = []
    if report.differing_returncodes:
        notes.append(
            f"{len(report.differing_returncodes)} replayed commands ended with another return code than in the "
            f"original (steps {', '.join(map(str, report.differing_returncodes))}): their outputs differ"
        )
    if report.same_as_submission is not None:
        verdict = "equal to" if report.same_as_submission else "NOT equal to"
        notes.append(f"the final tracked files are {verdict} the original's submission")
    if report.diverged:
        notes.append(f"the replay diverged: {report.diverged}")
    if report.environment_changes:
        notes.append(
            f"changed before the first step, as the original's environment had them (its submission changes them, no "
            f"command of it writes them): {', '.join(report.environment_changes)}"
        )
    if report.format == LLM_IDE_FORMAT and report.action_format == "tools":
        notes.append("the original's prompts as its run recorded them: without the tool list every request carried")
    if report.commands_python:
        notes.append(f"the commands' python3: {report.commands_python} (what they print depends on it)")
    if report.workdir_rewritten:
        notes.append("no bubblewrap: the commands ran at the checkout's own path (the original's workdir rewritten)")
    for note in notes:
        console.print(f"[dim]… {escape(note)}[/]")
