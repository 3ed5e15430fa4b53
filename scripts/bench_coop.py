#!/usr/bin/env python
"""Time per CooperBench pair: planning, execution and evaluation, on the shared dirty-equals task with scripted models.

For each pair, in the `coop` setting (lockstep execution), both planners agree after one message and each agent
implements its reference feature through `edit` actions (the whole file before → after, one per source file), then
submits; the pair is graded like `coop evaluate --gold` does for the same pair, side by side, so the run's eval.json
can be checked against the reference grading. Planning and execution carry no model latency (scripted): they measure
our machinery (graphs, worktrees, checkpoints, environment); evaluation runs the task's run_tests.sh twice (uv).
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.coop import CoopRun, Setting, load_task, parse_pairs, run_pair
from llm_ide.coop.evaluate import drop_test_files, evaluate_pair
from llm_ide.coop.settings import load_coop_settings
from llm_ide.coop.task import checkout_base

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "cooperbench"
TASK = SHARED / "dataset" / "samuelcolvin_dirty_equals_task" / "task43"
BUNDLE = SHARED / "repos" / "dirty-equals.bundle"
console = Console(highlight=False)


def act(thought: str, action: str, **params: object) -> str:
    import json

    return f"<thought>{thought}</thought>\n<action_type>{action}</action_type>\n<action_params>{json.dumps(params)}" \
           "</action_params>"  # fmt: skip


def reflect(summary: str) -> str:
    return f"<bad_action>false</bad_action>\n<lessons></lessons>\n<summary>{summary}</summary>"


def reference_edits(repo: Path, patch: Path) -> list[str]:
    source = drop_test_files(patch.read_text())
    files = [line.split(" b/", 1)[1] for line in source.splitlines() if line.startswith("diff --git")]
    before = {name: (repo / name).read_text() for name in files}
    subprocess.run(["git", "-C", str(repo), "apply", "-"], input=source, text=True, check=True)
    after = {name: (repo / name).read_text() for name in files}
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    responses = []
    for name in files:
        responses += [act(f"Implement the plan in {name}.", "edit", path=name, old=before[name], new=after[name]),
                      reflect(f"{name} updated.")]  # fmt: skip
    return [*responses, act("The plan is in place.", "submit")]


def write_scripts(folder: Path, pair: tuple[int, int], repo: Path, task) -> str:  # noqa: ANN001
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {
        "plan_1": [act("Split.", "communicate_with_agent", message=f"I implement feature {pair[0]}",
                       message_type="proposal"), act("Done.", "agreement_reached", plan=f"feature {pair[0]}")],
        "plan_2": [act("Done.", "agreement_reached", plan=f"feature {pair[1]}")],
        "run_1": reference_edits(repo, task.feature(pair[0]).patch),
        "run_2": reference_edits(repo, task.feature(pair[1]).patch),
    }  # fmt: skip
    for name, responses in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump({"responses": responses}))
    return f"scripted:{folder}/{{phase}}_{{agent}}.yaml"


def main(
    pairs: Annotated[str, typer.Option(help="Pairs of the shared task.")] = "1,2 3,4 5,6",
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    pairs = "1,2" if quick else pairs
    task = load_task(TASK)
    settings = load_config("default", environment={"tools": []})
    coop = load_coop_settings(values={"execution": {"lockstep": True}})
    table = Table("pair", "plan s", "exec s", "eval s", "total s", "merge", "gold merge", "both", "gold both",
                  "gold eval s", title="coop pair, scripted reference edits (shared dirty-equals task43)")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-coop-") as scratch:
        root = Path(scratch)
        repo = checkout_base(task, BUNDLE, root / "scratch-repo")
        for pair in parse_pairs(task, pairs):
            model = write_scripts(root / f"scripts_{pair[0]}_{pair[1]}", pair, repo, task)
            run = CoopRun(task=task.folder, pair=pair, setting=Setting.COOP, model=model, repo_source=BUNDLE)
            started = time.perf_counter()
            result = run_pair(run, task, root / "out", settings, coop)
            total = time.perf_counter() - started
            patches = (task.feature(pair[0]).patch.read_text(), task.feature(pair[1]).patch.read_text())
            gold = evaluate_pair(task, pair, patches, BUNDLE, root / f"gold_{pair[0]}_{pair[1]}")
            seconds = result["seconds"]
            match = (result["merge"]["status"], result["both_passed"]) == (gold.merge.status, gold.both_passed)
            rows.append((seconds, total, sum(gold.seconds.values()), match))
            table.add_row(
                f"{pair[0]},{pair[1]}", *(f"{seconds[p]:.2f}" for p in ("planning", "execution", "evaluation")),
                f"{total:.2f}", result["merge"]["status"], gold.merge.status, str(result["both_passed"]),
                str(gold.both_passed), f"{sum(gold.seconds.values()):.2f}",
            )  # fmt: skip
    console.print(table)

    def mean(phase: str) -> float:
        return statistics.mean(row[0][phase] for row in rows)

    print(
        f"RESULT pairs={len(rows)} planning_s={mean('planning'):.2f} execution_s={mean('execution'):.2f} "
        f"evaluation_s={mean('evaluation'):.2f} total_s={statistics.mean(r[1] for r in rows):.2f} "
        f"gold_eval_s={statistics.mean(r[2] for r in rows):.2f} matches_gold={sum(r[3] for r in rows)}/{len(rows)}"
    )


if __name__ == "__main__":
    typer.run(main)
