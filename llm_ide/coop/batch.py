"""Several pairs (and settings) of a task in one batch, and the summary of any set of pair results: pass rate, conflict
rate, and both per setting. A pair that fails is recorded with its error and the batch goes on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from llm_ide.coop.phases import check_models
from llm_ide.coop.record import PLANNED, CoopRun, Setting, planned
from llm_ide.coop.run import run_pair
from llm_ide.coop.settings import CoopSettings
from llm_ide.coop.task import CoopTask, check_source
from llm_ide.errors import LlmIdeError
from llm_ide.fileio import atomic_write
from llm_ide.whole_settings import Settings


class Rates(BaseModel):
    pairs: int = 0
    graded: int = 0  # pairs with both features tested (no error, evaluation on)
    passed: int = 0  # both features pass on the merge (single: its one feature)
    merged: int = 0  # pairs with a merge (two patches)
    conflicts: int = 0  # naive merge conflicts
    errors: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None

    @property
    def conflict_rate(self) -> float | None:
        return self.conflicts / self.merged if self.merged else None

    def add(self, result: dict[str, Any]) -> None:
        self.pairs += 1
        if result.get("error"):
            self.errors += 1
            return
        if (passed := result.get("both_passed", result.get("passed"))) is not None:  # single: its one feature
            self.graded += 1
            self.passed += bool(passed)
        if merge := result.get("merge"):
            self.merged += 1
            self.conflicts += merge.get("status") == "conflicts"

    def as_dict(self) -> dict[str, Any]:
        return {**self.model_dump(), "pass_rate": self.pass_rate, "conflict_rate": self.conflict_rate}


class Summary(BaseModel):
    total: Rates
    by_setting: dict[str, Rates]

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total.as_dict(), "by_setting": {k: v.as_dict() for k, v in self.by_setting.items()}}


def summarize(results: Iterable[dict[str, Any]]) -> Summary:
    """Rates over pair results (eval.json contents, or the error records of a batch)."""
    total, by_setting = Rates(), {}
    for result in results:
        total.add(result)
        by_setting.setdefault(str(result.get("setting")), Rates()).add(result)
    order = [s.value for s in Setting]
    ranked = dict(sorted(by_setting.items(), key=lambda item: order.index(item[0]) if item[0] in order else 99))
    return Summary(total=total, by_setting=ranked)


def collect(folder: Path) -> list[dict[str, Any]]:
    """The eval.json of every pair folder under `folder` (the --output of `coop run`); a pair without one, or a pair a
    batch was asked for whose folder was never made, is an error record saying what it lacks (a summary counts it)."""
    pairs = {path.parent for path in (*folder.glob("*/eval.json"), *folder.glob("*/run.json"))}
    unstarted = [item for name, item in planned(folder).items() if not (folder / name).is_dir()]
    return [pair_result(pair) for pair in sorted(pairs)] + [
        {**item, "error": "unfinished: never started"} for item in unstarted
    ]


def named(run: CoopRun) -> dict[str, Any]:
    """A pair's setting, k and agents, as its result names them."""
    return {"setting": str(run.setting), "k": run.k, "pair": list(run.pair)}


def plan_batch(task: CoopTask, runs: list[CoopRun], output: Path) -> None:
    """The batch's pairs added to those `output` holds (before any runs: a batch stopped early counts the rest)."""
    output.mkdir(parents=True, exist_ok=True)
    asked = {run.folder_name(task): named(run) for run in runs}
    atomic_write(output / PLANNED, json.dumps({**planned(output), **asked}, indent=2) + "\n")


def pair_result(pair: Path) -> dict[str, Any]:
    """A pair folder's eval.json, else `{setting, k, pair, error}`: unfinished (its missing patches) or ungraded."""
    if (graded := pair / "eval.json").is_file():
        return json.loads(graded.read_text(encoding="utf-8"))
    run = CoopRun.model_validate_json((pair / "run.json").read_text(encoding="utf-8"))
    missing = [name for agent in run.agents() if not (pair / (name := f"patch_agent{agent}.patch")).is_file()]
    why = f"{', '.join(missing)} missing (run it again to resume)" if missing else "not graded (no eval.json)"
    return {"setting": str(run.setting), "k": run.k, "pair": list(run.pair), "error": f"unfinished: {why}"}


def run_pairs(
    task: CoopTask,
    pairs: list[tuple[int, int]],
    settings_names: list[str],
    *,
    model: str,
    repo_source: Path,
    output: Path,
    settings: Settings,
    coop: CoopSettings,
    k: int = 0,
    base_url: str | None = None,
    environment: str | None = None,
    evaluate: bool = True,
    on_pair: Callable[[CoopRun], None] | None = None,
    on_event: Callable[[str, Any], None] | None = None,
    on_result: Callable[[CoopRun, dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], Summary]:
    """Every pair in every setting, one after the other; each result is eval.json's content, or `{…, "error"}`. What
    every pair needs (each model the agents and planners use, the repository source) is checked first, once."""
    check_inputs(model, settings, base_url, repo_source)
    fields = {"model": model, "k": k, "repo_source": repo_source.resolve(), "base_url": base_url}
    runs = [
        CoopRun(task=task.folder, pair=pair, setting=Setting(setting), environment=environment, **fields)
        for setting in settings_names
        for pair in pairs
    ]
    plan_batch(task, runs, output)
    results = []
    for run in runs:
        if on_pair:
            on_pair(run)
        try:
            result = run_pair(run, task, output, settings, coop, on_event=on_event, evaluate=evaluate)
        except LlmIdeError as error:
            result = {**named(run), "error": str(error)}
        results.append(result)
        if on_result:
            on_result(run, result)
    summary = summarize(results)
    output.mkdir(parents=True, exist_ok=True)
    (output / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return results, summary


def check_inputs(model: str, settings: Settings, base_url: str | None, repo_source: Path) -> None:
    """Each model and the repository source (`check_models`, `check_source`): one line before any pair."""
    check_models(model, settings, base_url)
    check_source(repo_source)
