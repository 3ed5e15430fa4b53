"""The figures of bench_replay.py's runs: per run, per repository and pooled, of each variant under each price
profile, as tables and the RESULT line (definitions: docs/replay.md)."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from llm_ide.pricing import PROFILES
from llm_ide.replay.model import AGENTS, HISTORY, AgentStep, Fraction, Prices, ReplayReport

MARKS = (10, 15, 20, 30)  # 15: a short run's whole bill (issue 36)


@dataclass
class Run:
    variant: str
    instance: str
    report: ReplayReport | None
    seconds: float
    error: str = ""
    profile: str = "gpt"

    @property
    def repo(self) -> str:
        return repo_of(self.instance)

    @property
    def group(self) -> str:
        """The variant under its price profile: `default@open`."""
        return f"{self.variant}@{self.profile}"


def repo_of(instance: str) -> str:
    """`psf__requests-1142` → `requests`."""
    return re.sub(r"-\d+$", "", instance).split("__")[-1]


Cost = Callable[[ReplayReport, str, int | None], float]  # (report, agent, up to step) → the figure summed
COSTS: dict[str, Cost] = {
    "bill": lambda report, agent, mark: report.totals(agent, mark).bill,
    "input": lambda report, agent, mark: report.input_cost(agent, mark),
    "raw": lambda report, agent, mark: report.totals(agent, mark).raw,
    "uncached": lambda report, agent, mark: report.totals(agent, mark).uncached,
    "output": lambda report, agent, mark: report.totals(agent, mark).output,
}


def pooled_ratio(runs: list[Run], mark: int | None, cost: Cost, against: str = "original") -> float | None:
    """llm-ide / `against` over the runs that reached `mark` and bill `against` (HISTORY: the original's requests on the
    replay's own outputs, the same session for both agents where this machine's commands print otherwise)."""
    reached = [
        run.report
        for run in runs
        if run.report and run.report.billed(against) and (mark is None or len(run.report.steps) >= mark)
    ]
    theirs = sum(cost(report, against, mark) for report in reached)
    return sum(cost(report, "llm-ide", mark) for report in reached) / theirs if theirs else None


def median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def bill_figures(runs: list[Run]) -> dict[str, float | None]:
    """The bill (and the input cost alone) llm-ide / mini, pooled over the runs that reached each mark, and the median
    of the per-run ratios; the raw, uncached and output characters over the whole runs; the bill against full history
    on the replay's own outputs (`history_*`)."""
    figures: dict[str, float | None] = {}
    reports = [run.report for run in runs if run.report]
    for mark in (*MARKS, None):
        name = "end" if mark is None else str(mark)
        figures[f"bill_{name}"] = pooled_ratio(runs, mark, COSTS["bill"])
        figures[f"bill_{name}_median"] = median([report.bill_ratio(mark) for report in reports])
        figures[f"input_{name}"] = pooled_ratio(runs, mark, COSTS["input"])
        figures[f"input_{name}_median"] = median([report.input_ratio(mark) for report in reports])
    for key in ("raw", "uncached", "output"):
        figures[key], figures[f"{key}_median"] = pooled_ratio(runs, None, COSTS[key]), None
    ratios = [report.bill_ratio(mark) for report in reports for mark in (*MARKS, None)]
    figures["worst_run_bill"], figures["worst_run_bill_median"] = max_or_none(ratios), None
    for mark in (10, 30, None):
        name = "end" if mark is None else str(mark)
        figures[f"history_{name}"] = pooled_ratio(runs, mark, COSTS["bill"], HISTORY)
        figures[f"history_{name}_median"] = median([report.bill_ratio(mark, HISTORY) for report in reports])
    ratios = [report.bill_ratio(mark, HISTORY) for report in reports for mark in (*MARKS, None)]
    figures["worst_run_history"], figures["worst_run_history_median"] = max_or_none(ratios), None
    return figures


FIDELITY: dict[str, Callable[[AgentStep], Fraction]] = {
    "edit_grounding": lambda t: t.pre_image,
    "edit_grounding_per_edit": lambda t: Fraction(total=t.edits, present=t.edits_grounded),
    "edit_context": lambda t: t.context,
    "reference_recall": lambda t: t.references,
}
GOAL_FIDELITY = ("edit_grounding", "edit_context", "reference_recall")


def pooled_fidelity(runs: list[Run], agent: str, key: str) -> tuple[float | None, float | None]:
    """(pooled over every line or reference of every run, median of the per-run fractions)."""
    parts = [FIDELITY[key](run.report.totals(agent)) for run in runs if run.report]
    return sum(parts, Fraction()).value, median([part.value for part in parts])


def shown(value: float | None, missing: str = "–") -> str:
    """A figure in a table (`–`: a step the run never reached), or in the RESULT line (`nan` there: a number)."""
    return missing if value is None else f"{value:.2f}"


def both(report: ReplayReport, key: str) -> str:
    return " · ".join(shown(FIDELITY[key](report.totals(agent)).value) for agent in AGENTS)


def runs_table(variant: str, runs: list[Run]) -> Table:
    table = Table(title=f"{variant}: per run, llm-ide / mini (fidelity: llm-ide · mini)")
    columns = (
        "instance",
        "steps",
        "bill 10",
        "bill 15",
        "bill 20",
        "bill 30",
        "bill end",
        "input end",
        "history end",
        "uncached",
        "edit grounding",
        "per edit",
        "±3 lines",
        "reference recall",
        "rc differs",
        "same tree",
        "seconds",
    )
    for column in columns:
        if column == "instance":  # whole: the ids are what a reader looks for
            table.add_column(column, no_wrap=True, min_width=max((len(run.instance) for run in runs), default=8))
        else:
            table.add_column(column, justify="right")
    for run in runs:
        report = run.report
        if report is None:
            table.add_row(run.instance, "failed", run.error[-80:], *[""] * (len(columns) - 4), f"{run.seconds:.0f}")
            continue
        ours, theirs = report.totals("llm-ide"), report.totals("original")
        table.add_row(
            run.instance,
            str(len(report.steps)),
            *[shown(report.bill_ratio(mark)) for mark in (*MARKS, None)],
            shown(report.input_ratio()),
            shown(report.bill_ratio(None, HISTORY)),
            shown(ours.uncached / theirs.uncached if theirs.uncached else None),
            *[both(report, key) for key in FIDELITY],
            str(len(report.differing_returncodes)),
            {True: "yes", False: "NO", None: "–"}[report.same_as_submission] + ("" if not report.diverged else " ⚠"),
            f"{run.seconds:.0f}" if run.seconds else "–",
        )
    return table


def summary(runs: list[Run]) -> dict[str, float | None]:
    figures = bill_figures(runs)
    for key in FIDELITY:
        for agent, prefix in (("llm-ide", ""), ("original", "mini_")):
            pooled, middle = pooled_fidelity(runs, agent, key)
            figures[f"{prefix}{key}"], figures[f"{prefix}{key}_median"] = pooled, middle
    for key in GOAL_FIDELITY:  # the weakest repository, as a share of mini's figure there
        figures[f"worst_repo_{key}"] = min_or_none(
            [
                vs_mini(pooled_fidelity(group, "llm-ide", key)[0], pooled_fidelity(group, "original", key)[0])
                for group in by_repo(runs).values()
            ]
        )
        figures[f"worst_repo_{key}_median"] = None
    figures["worst_run_edit_grounding"] = min_or_none(
        [run.report.totals("llm-ide").pre_image.value for run in runs if run.report]
    )
    figures["worst_run_edit_grounding_median"] = None
    shares = [vs_mini(*(run.report.totals(agent).pre_image.value for agent in AGENTS)) for run in runs if run.report]
    figures["worst_run_edit_grounding_vs_mini"], figures["worst_run_edit_grounding_vs_mini_median"] = (
        min_or_none(shares),
        None,
    )
    return figures


def vs_mini(ours: float | None, theirs: float | None) -> float | None:
    return None if ours is None or not theirs else ours / theirs


def max_or_none(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def min_or_none(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return min(present) if present else None


def by_repo(runs: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda run: run.repo):
        groups.setdefault(run.repo, []).append(run)
    return groups


def repos_table(variant: str, runs: list[Run]) -> Table:
    """Per repository and pooled: the bill, the input cost and uncached characters against mini's, each fidelity
    figure of both agents."""
    table = Table(title=f"{variant}: per repository, pooled (llm-ide / mini; fidelity: llm-ide · mini)")
    columns = (
        "repository",
        "runs",
        "steps",
        "bill 10",
        "bill 30",
        "bill end",
        "input end",
        "uncached",
        "edit grounding",
        "±3 lines",
        "reference recall",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "repository" else "right")
    groups = by_repo(runs)
    for name, group in [*groups.items(), ("pooled", runs)]:
        figures = summary(group)
        steps = sum(len(run.report.steps) for run in group if run.report)
        fidelity = [f"{shown(figures[key])} · {shown(figures['mini_' + key])}" for key in GOAL_FIDELITY]
        row = [name, str(len(group)), str(steps), *[shown(figures[k]) for k in ("bill_10", "bill_30", "bill_end")]]
        table.add_row(*row, shown(figures["input_end"]), shown(figures["uncached"]), *fidelity)
    return table


def pooled_table(variants: dict[str, list[Run]]) -> Table:
    table = Table(title="pooled over the runs (median of the per-run figures in brackets)")
    table.add_column("figure")
    for variant in variants:
        table.add_column(variant, justify="right")
    figures = {variant: summary(runs) for variant, runs in variants.items()}
    first = next(iter(figures.values()))
    for key in first:
        if key.endswith("_median"):
            continue
        row = [
            shown(f[key]) + (f" ({shown(f[key + '_median'])})" if f[key + "_median"] is not None else "")
            for f in figures.values()
        ]
        table.add_row(key, *row)
    return table


RESULT_KEYS = (
    "bill_10",
    "bill_15",
    "bill_20",
    "bill_30",
    "bill_end",
    "bill_10_median",
    "bill_30_median",
    "bill_end_median",
    "worst_run_bill",
    "history_10",
    "history_30",
    "history_end",
    "worst_run_history",
    "input_end",
    "uncached",
    "raw",
    "output",
    "edit_grounding",
    "mini_edit_grounding",
    "edit_grounding_per_edit",
    "mini_edit_grounding_per_edit",
    "edit_context",
    "mini_edit_context",
    "reference_recall",
    "mini_reference_recall",
    "worst_repo_edit_grounding",
    "worst_repo_edit_context",
    "worst_repo_reference_recall",
    "worst_run_edit_grounding",
    "worst_run_edit_grounding_vs_mini",
)


def result_line(groups: dict[str, list[Run]]) -> str:
    """Every group's figures, each key prefixed with its profile (`gpt_bill_end`) and, but for the first variant's, its
    variant (`compact_gpt_bill_end`); `runs` and `same_tree` (in every profile) of the first variant."""
    pairs, first = [], next(iter(groups.values()))[0].variant if groups else ""
    for runs in groups.values():
        variant, profile = runs[0].variant, runs[0].profile
        prefix = ("" if variant == first else re.sub(r"[^a-z0-9_]", "_", variant.lower()) + "_") + profile + "_"
        figures = summary(runs)
        pairs += [f"{prefix}{key}={shown(figures[key], 'nan')}" for key in RESULT_KEYS]
    mine = [run for runs in groups.values() for run in runs if run.variant == first]
    instances = sorted({run.instance for run in mine if run.report is not None})  # the replays that ran
    same = sum(
        all(run.report and run.report.same_as_submission for run in mine if run.instance == i) for i in instances
    )
    failed = len({run.instance for run in mine if run.report is None})
    said = [f"runs={len(instances)}", f"same_tree={same}/{len(instances)}", f"failed={failed}"]
    return "RESULT " + " ".join([*pairs, *said])


def grouped(done: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in done:
        groups.setdefault(run.group, []).append(run)
    return groups


def profiles_table(groups: dict[str, list[Run]]) -> Table:
    """The bill of each variant under each price profile, side by side: pooled at steps 10, 15, 30 and the end, and
    the worst run's ratio at any step of MARKS or its end; below, the same against full history on the replay's own
    outputs."""
    profiles = list(dict.fromkeys(runs[0].profile for runs in groups.values()))
    variants = list(dict.fromkeys(runs[0].variant for runs in groups.values()))
    title = "the bill llm-ide / mini under each price profile (pooled at 10 / 15 / 30 / end; the worst run at any)"
    table = Table(title=title)
    table.add_column("variant")
    for profile in profiles:
        table.add_column(Prices.of(profile).described() if profile in PROFILES else profile)
    for variant in variants:
        cells = []
        for profile in profiles:
            figures = summary(groups.get(f"{variant}@{profile}", []))
            bills = " / ".join(shown(figures[f"bill_{mark}"]) for mark in ("10", "15", "30", "end"))
            history = " / ".join(shown(figures[f"history_{mark}"]) for mark in ("10", "30", "end"))
            worst, worst_history = shown(figures["worst_run_bill"]), shown(figures["worst_run_history"])
            cells.append(f"{bills} ({worst})\nfull history 10 / 30 / end: {history} ({worst_history})")
        table.add_row(variant, *cells)
    return table


def report(console: Console, done: list[Run], json_out: Path | None) -> None:
    groups = grouped(done)
    for group, runs in groups.items():
        console.print(runs_table(group, runs))
        console.print(repos_table(group, runs))
    console.print(pooled_table(groups))
    console.print(profiles_table(groups))
    if json_out is not None:
        figures = {
            group: {**summary(runs), "repos": {name: summary(part) for name, part in by_repo(runs).items()}}
            for group, runs in groups.items()
        }
        json_out.write_text(json.dumps(figures, indent=1))
