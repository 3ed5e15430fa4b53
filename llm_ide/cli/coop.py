"""`llm-ide coop …`: two agents, two features, one repository (CooperBench)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from llm_ide.cli.console import (
    console,
    fail,
    interrupted_exit,
    many,
    print_interrupted,
    print_whole,
    warnings_on_console,
)
from llm_ide.cli.options import BaseUrl, model_name
from llm_ide.cli.resuming import endpoint_args
from llm_ide.cli.run_options import MODEL_HELP, RunConfig, environment_option
from llm_ide.environments.scratch import owned_name

coop_app = typer.Typer(help="Cooperation: two agents, two features, one repository (CooperBench tasks).")

# `coop evaluate`
RunDir = Annotated[
    Path | None,
    typer.Argument(help="A pair folder of `coop run` (run.json, patches), or a folder of them (the --output)."),
]
Gold = Annotated[
    Path | None,
    typer.Option("--gold", help="Grade the reference patches of this task folder's pairs.", show_default="none"),
]
Pairs = Annotated[str, typer.Option("--pairs", "--pair", help="i,j pairs separated by spaces, or `all`.")]
GoldSource = Annotated[
    Path | None,
    typer.Option(
        "--repo-source",
        help="A local clone or git bundle of the task's repository.",
        show_default="the one *.bundle in the dataset's repos/ folder",
    ),
]
GoldOutput = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Folder for eval_<i>_<j>.json files.", show_default="runs/coop-gold/<task name>"
    ),
]
Tests = Annotated[bool, typer.Option("--tests/--no-tests", help="Run each feature's tests on the merge.")]

# `coop run`
TaskDir = Annotated[Path, typer.Argument(help="A task folder: dataset/<repo>_task/task<id>/.")]
Pair = Annotated[str, typer.Option("--pair", "--pairs", help="i,j (or several: `1,2 3,4`, or `all`).")]
AgentModel = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help=f"{MODEL_HELP[:-1]}: every agent's; `{{agent}}`/`{{phase}}` (plan, run) in it pick one per agent/phase.",
        show_default="$LLM_IDE_MODEL",
    ),
]
SettingNames = Annotated[
    list[str] | None,
    typer.Option(
        help="single | solo | coop | coop_ablation; several (repeated or `coop,solo`) compare them.",
        show_default="coop",
    ),
]
Repetition = Annotated[int, typer.Option(help="Repetition index (in every output path).", min=0)]
RepoSource = Annotated[
    Path | None,
    typer.Option("--repo-source", help="A local clone or git bundle.", show_default="repos/*.bundle beside it"),
]
PairsOutput = Annotated[Path, typer.Option("--output", "-o", help="Where the pair folders go.")]
Environment = Annotated[str, environment_option()]
CoopConfig = Annotated[Path | None, typer.Option(help="Coop settings override.", show_default="none")]
Evaluate = Annotated[bool, typer.Option("--evaluate/--no-evaluate", help="Grade each pair.")]


def repository_source(task_dir: Path, given: Path | None) -> Path:
    """`--repo-source`, else the bundle beside the dataset; neither: a CoopError."""
    from llm_ide.coop.task import CoopError, default_source

    source = given or default_source(task_dir)
    if source is None:
        raise CoopError("no repository source: give --repo-source PATH (a local clone or a git bundle)")
    return source


@coop_app.command("evaluate")
def evaluate_command(
    run_dir: RunDir = None,
    gold: Gold = None,
    pairs: Pairs = "all",
    repo_source: GoldSource = None,
    output: GoldOutput = None,
    tests: Tests = True,
) -> None:
    """Merge each pair (agent 1 into agent 2: naive, union on conflict) and run both features' tests on the result."""
    if (gold is None) == (run_dir is None):
        said = "not both" if gold else "one of them"
        raise fail(f"give a run folder (coop evaluate RUN_DIR) or a task folder with --gold: {said}")
    if gold is not None:
        grade_gold(gold, pairs, repo_source, output, tests)
    elif given := [option for option, value in (("--pairs", pairs != "all"), ("--output", output)) if value]:
        raise fail(f"{' and '.join(given)}: only with --gold (a run folder's pairs and files are its own)")
    else:
        run_dir = run_dir.resolve()
        regrade(run_dir) if (run_dir / "run.json").is_file() else grade_folder(run_dir)


def grade_gold(gold: Path, pairs: str, repo_source: Path | None, output: Path | None, tests: bool) -> None:
    """The reference patches of the task's pairs merged (and tested): a row and an eval_<i>_<j>.json each, then
    summary.json."""
    from llm_ide.cli.coop_batch import pair_progress
    from llm_ide.coop.evaluate import evaluate_pair
    from llm_ide.coop.task import check_source, load_task, parse_pairs
    from llm_ide.errors import UsageError
    from llm_ide.run.usage import refuse_a_file

    try:
        task = load_task(gold)
        chosen = parse_pairs(task, pairs)
        source = repository_source(gold, repo_source)
        check_source(source)
        out = output or Path("runs") / "coop-gold" / task.name.replace("/", "_")
        refuse_a_file(out, "--output")
        out.mkdir(parents=True, exist_ok=True)
        table = Table("pair", "merge", "strategy", "sections", "feature 1", "feature 2", "both", "seconds")
        results = []
        with pair_progress(len(chosen)) as progress:
            for pair in chosen:
                progress.begin(f"pair {pair[0]},{pair[1]} gold")
                patches = (task.feature(pair[0]).patch.read_text(), task.feature(pair[1]).patch.read_text())
                with tempfile.TemporaryDirectory(prefix=owned_name("coop")) as scratch:
                    result = evaluate_pair(task, pair, patches, source, Path(scratch), run_tests=tests)
                (out / f"eval_{pair[0]}_{pair[1]}.json").write_text(result.model_dump_json(indent=2) + "\n")
                results.append(result)
                table.add_row(*gold_row(pair, result.model_dump()))
                progress.done(None, result.model_dump())
    except UsageError as error:  # (a CoopError too)
        raise fail(str(error)) from None
    print_whole(table)
    conflicted = sum(r.merge.status == "conflicts" for r in results)
    passed = sum(bool(r.both_passed) for r in results)
    summary = {"pairs": len(results), "conflicts": conflicted, "both_passed": passed if tests else None}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    both = f", {passed} pass both features" if tests else ""
    console.print(f"{many(len(results), 'pair')}: {conflicted} conflict under the naive merge{both} → {out}")


def gold_row(pair: tuple[int, int], result: dict[str, Any]) -> list[str]:
    from llm_ide.cli.coop_batch import verdict

    merge = result["merge"]
    return [
        f"{pair[0]},{pair[1]}",
        merge["status"],
        merge["strategy"] or "—",
        str(merge["conflict_sections"]),
        verdict(result["feature1"]),
        verdict(result["feature2"]),
        {True: "yes", False: "no"}.get(result["both_passed"], "—"),
        f"{sum(result['seconds'].values()):.1f}",
    ]


def grade_folder(folder: Path) -> None:
    """A folder of `coop run` pair folders: the ones without eval.json graded, then every pair and the summary."""
    from llm_ide.cli.coop_batch import pairs_table, summary_table
    from llm_ide.coop.record import CoopRun, planned

    pairs = sorted(path.parent for path in folder.glob("*/run.json"))
    if not pairs and not planned(folder):
        raise fail(f"{folder}: neither a coop run folder (run.json) nor a folder of them")
    from llm_ide.coop.batch import collect, summarize  # (the pairs' runner: once there are pairs)

    for pair in pairs:
        run = CoopRun.model_validate_json((pair / "run.json").read_text())
        patches = [pair / f"patch_agent{agent}.patch" for agent in run.agents()]
        if not (pair / "eval.json").is_file() and all(path.is_file() for path in patches):
            regrade(pair)
    results = collect(folder)
    summary = summarize(results)
    console.print(pairs_table(results))
    console.print(summary_table(summary))
    (folder / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    unfinished = sum(bool(result.get("error")) for result in results)
    more = f", {unfinished} unfinished (no eval.json: counted as errors)" if unfinished else ""
    console.print(f"{many(len(results) - unfinished, 'pair')} graded{more}")
    if summary.total.errors:  # as `coop run` of the same pairs exits
        raise typer.Exit(1)


def regrade(folder: Path) -> None:
    """Grade a `coop run` pair folder again from its run.json and patches; eval.json is rewritten."""
    from llm_ide.coop.record import CoopRun
    from llm_ide.coop.task import CoopError, load_task
    from llm_ide.fileio import atomic_write

    manifest = folder / "run.json"
    try:
        if not manifest.is_file():
            raise CoopError(f"{folder}: not a coop run folder (run.json is missing)")
        run = CoopRun.model_validate_json(manifest.read_text())
        patches = [folder / f"patch_agent{agent}.patch" for agent in run.agents()]
        missing = [p.name for p in patches if not p.is_file()]
        if missing:
            raise CoopError(f"{folder}: {', '.join(missing)} missing (the run did not finish: run it again to resume)")
        task = load_task(run.task)
        from llm_ide.coop.phases import grade  # (the pair's phases: once its record, patches and task are read)

        result = {"setting": str(run.setting), "k": run.k, "pair": list(run.pair)}
        result |= grade(run, task, folder, [p.read_text() for p in patches])
    except (CoopError, ValueError) as error:
        raise fail(str(error)) from None
    atomic_write(folder / "eval.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    merge = (result.get("merge") or {}).get("status", "—")
    said = (
        f"passed: {'yes' if result['passed'] else 'no'}"
        if "passed" in result
        else "both passed: "
        + ("yes" if result.get("both_passed") else "no" if result.get("both_passed") is False else "—")
    )
    console.print(f"{folder.name}: merge {merge}, {said}")


@coop_app.command("run")
def run_command(
    task_dir: TaskDir,
    pair: Pair,
    model: AgentModel = None,
    setting: SettingNames = None,
    k: Repetition = 0,
    repo_source: RepoSource = None,
    output: PairsOutput = Path("runs/coop"),
    base_url: BaseUrl = None,
    environment: Environment = "local",
    config: RunConfig = None,
    coop_config: CoopConfig = None,
    evaluate: Evaluate = True,
) -> None:
    """Plan, implement and grade feature pairs of a task (a rerun with the same output resumes); several pairs or
    settings make a batch with a progress bar and a summary (pass rate, conflict rate, per setting: summary.json)."""
    from llm_ide.cli.coop_batch import pairs_table, summary_table
    from llm_ide.config import config_layers, validate_layers, with_user_config
    from llm_ide.coop.settings import agents_step_limit, load_coop_settings
    from llm_ide.coop.task import load_task, parse_pairs
    from llm_ide.errors import LlmIdeError
    from llm_ide.run.usage import refuse_a_file

    names, model = setting_names(setting), model_name(model)
    try:
        refuse_a_file(output, "--output")
        task = load_task(task_dir)
        source = repository_source(task_dir, repo_source)
        layers = config_layers("default", with_user_config(config))
        settings, coop = validate_layers(layers), load_coop_settings(coop_config)
        coop = agents_step_limit(coop, settings, layers, coop_config)  # agent.step_limit in -c: each agent's
        chosen = parse_pairs(task, pair)
        results, summary = run_with_progress(
            task,
            chosen,
            names,
            model=model,
            repo_source=source,
            output=output,
            settings=settings,
            coop=coop,
            k=k,
            base_url=base_url,
            environment=environment,
            evaluate=evaluate,
        )
    except LlmIdeError as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        kept = f"each pair keeps what it did (plans, finished agents, checkpoints) in {output}"
        print_interrupted(kept, *endpoint_args(model, base_url))
        raise interrupted_exit(interrupt) from None
    console.print(pairs_table(results))
    console.print(summary_table(summary))
    console.print(f"{many(len(results), 'pair')} → {output} (summary.json)")
    if summary.total.errors:
        raise typer.Exit(1)


def setting_names(given: list[str] | None) -> list[str]:
    """`--setting`, repeated or comma-separated (coop when none), each a known one."""
    from llm_ide.coop.record import Setting

    names = [name.strip() for item in (given or ["coop"]) for name in item.split(",") if name.strip()]
    if unknown := [name for name in names if name not in {s.value for s in Setting}]:
        raise fail(f"unknown setting {unknown[0]!r}: use single, solo, coop or coop_ablation")
    if twice := [name for index, name in enumerate(names) if name in names[:index]]:
        raise fail(f"setting {twice[0]!r} given twice: give each setting once")
    return names


def run_with_progress(task: Any, pairs: list[tuple[int, int]], names: list[str], **options: Any) -> tuple[Any, Any]:
    """Every pair in every setting under one progress bar, each pair's result printed as it ends (warnings above)."""
    from llm_ide.cli.coop_batch import pair_progress
    from llm_ide.coop.batch import run_pairs

    with pair_progress(len(pairs) * len(names)) as progress, warnings_on_console(more=("llm_ide.coop",)):
        listeners = {"on_pair": progress.start, "on_event": progress.event, "on_result": progress.done}
        return run_pairs(task, pairs, names, **options, **listeners)
