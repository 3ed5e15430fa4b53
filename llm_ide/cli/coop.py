"""`llm-ide coop …`: two agents, two features, one repository (CooperBench)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from llm_ide.cli.console import console, fail

coop_app = typer.Typer(help="Cooperation: two agents, two features, one repository (CooperBench tasks).")


def default_source(task_dir: Path) -> Path | None:
    """The bundle CooperBench ships beside its dataset folder (`repos/<repo>.bundle`), when there is one."""
    repos = task_dir.resolve().parents[2] / "repos" if len(task_dir.resolve().parents) > 2 else None
    bundles = sorted(repos.glob("*.bundle")) if repos and repos.is_dir() else []
    return bundles[0] if len(bundles) == 1 else None


@coop_app.command("evaluate")
def evaluate_command(
    gold: Annotated[Path, typer.Option("--gold", help="Grade the reference patches of this task folder's pairs.")],
    pairs: Annotated[str, typer.Option("--pairs", "--pair", help="i,j pairs separated by spaces, or `all`.")] = "all",
    repo_source: Annotated[
        Path | None, typer.Option("--repo-source", help="A local clone or git bundle of the task's repository.")
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Folder for eval_<i>_<j>.json files.")] = None,
    tests: Annotated[bool, typer.Option("--tests/--no-tests", help="Run each feature's tests on the merge.")] = True,
) -> None:
    """Merge each pair (agent 1 into agent 2: naive, union on conflict) and run both features' tests on the result."""
    from llm_ide.coop.evaluate import evaluate_pair
    from llm_ide.coop.task import CoopError, load_task, parse_pairs

    try:
        task = load_task(gold)
        chosen = parse_pairs(task, pairs)
        source = repo_source or default_source(gold)
        if source is None:
            raise CoopError("no repository source: give --repo-source PATH (a local clone or a git bundle)")
        out = output or Path("runs") / "coop-gold" / task.name.replace("/", "_")
        out.mkdir(parents=True, exist_ok=True)
        table = Table("pair", "merge", "strategy", "sections", "feature 1", "feature 2", "both", "seconds")
        results = []
        for pair in chosen:
            patches = (task.feature(pair[0]).patch.read_text(), task.feature(pair[1]).patch.read_text())
            with tempfile.TemporaryDirectory(prefix="llm-ide-coop-") as scratch:
                result = evaluate_pair(task, pair, patches, source, Path(scratch), run_tests=tests)
            (out / f"eval_{pair[0]}_{pair[1]}.json").write_text(result.model_dump_json(indent=2) + "\n")
            results.append(result)

            def verdict(outcome) -> str:  # noqa: ANN001
                return "—" if outcome is None else f"{'pass' if outcome.passed else 'FAIL'} {outcome.tests_passed}"

            table.add_row(
                f"{pair[0]},{pair[1]}", result.merge.status, result.merge.strategy or "—",
                str(result.merge.conflict_sections), verdict(result.feature1), verdict(result.feature2),
                "yes" if result.both_passed else "no", f"{sum(result.seconds.values()):.1f}",
            )  # fmt: skip
    except CoopError as error:
        raise fail(str(error)) from None
    console.print(table)
    conflicted = sum(r.merge.status == "conflicts" for r in results)
    passed = sum(r.both_passed for r in results)
    summary = {"pairs": len(results), "conflicts": conflicted, "both_passed": passed if tests else None}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(f"{len(results)} pairs: {conflicted} conflict under the naive merge"
                  + (f", {passed} pass both features" if tests else "") + f" → {out}")  # fmt: skip
