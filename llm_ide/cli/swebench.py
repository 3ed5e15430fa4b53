"""`llm-ide swebench`, `llm-ide swebench-single`, `llm-ide evaluate` (also `mini-extra swebench[-single]`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_ide.cli.console import (
    config_default,
    console,
    err_console,
    fail,
    interrupted_exit,
    print_event,
    print_interrupted,
    warnings_on_console,
)
from llm_ide.config import with_user_config
from llm_ide.errors import ExitStatus, install_signal_policy
from llm_ide.terminal import terminal_safe

Subset = Annotated[
    str,
    typer.Option(help="lite | verified | full | a Hugging Face dataset name | a local .json/.jsonl/.parquet file."),
]
Split = Annotated[str, typer.Option(help="Dataset split (dev, test); ignored for local files.")]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="provider:name, scripted:PATH, or an OpenAI-compatible name.",
        show_default="$LLM_IDE_MODEL",
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint.", show_default="$OPENAI_BASE_URL, else the provider's own"),
]
ConfigFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML file(s) overriding keys of the swebench config.",
        show_default="none: llm_ide/prompts/swebench.yaml",
    ),
]
EnvironmentKind = Annotated[
    str, typer.Option("--environment", "--environment-class", help="docker (one container per instance) or local.")
]
Checkpoint = Annotated[
    str | None,
    typer.Option(help="sqlite:PATH | postgres://… | memory.", show_default="SQLite in each instance's folder"),
]
Engine = Annotated[
    str, typer.Option(help="local (a thread pool of --workers) or ray (Ray tasks on the cluster at --address).")
]
Address = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="--engine ray: the cluster (HOST:PORT of `ray start --head`, or auto).",
        show_default="a one-node cluster started for the batch",
    ),
]
StepLimit = Annotated[
    int | None,
    typer.Option(help="Maximum operations per instance.", show_default=config_default("agent.step_limit", "swebench")),
]


def _model(model: str | None) -> str:
    model = model or os.environ.get("LLM_IDE_MODEL")
    if not model:
        raise fail("no model: pass --model (e.g. openai:gpt-5-mini, scripted:script.yaml) or set LLM_IDE_MODEL")
    return model


def _environment(kind: str) -> str:
    from llm_ide.environments import KINDS

    kind = kind.lower().removesuffix("environment")
    if kind not in KINDS:
        raise fail(f"unknown environment {kind!r}: use {' or '.join(sorted(KINDS))}")
    return kind


def _options(**values: Any) -> Any:
    from llm_ide.config import ConfigError
    from llm_ide.swebench.batch import BatchOptions, batch_config

    step_limit, run_cost_limit = values.pop("step_limit", None), values.pop("run_cost_limit", None)
    agent = {k: v for k, v in (("step_limit", step_limit), ("cost_limit", run_cost_limit)) if v is not None}
    options = BatchOptions(config_values={"agent": agent} if agent else {}, **values)
    try:
        batch_config(options)
    except ConfigError as error:
        raise fail(str(error)) from None
    return options


def _check_environment(kind: str) -> None:
    from llm_ide.environments import capabilities
    from llm_ide.swebench.preflight import SWEbenchError, check_docker

    if capabilities(kind).image:  # a container engine is needed
        try:
            check_docker()
        except SWEbenchError as error:
            raise fail(str(error)) from None


def swebench_command(
    subset: Subset = "lite",
    split: Split = "dev",
    slice_spec: Annotated[
        str, typer.Option("--slice", help="Python slice of the selection, e.g. 0:10.", show_default="all")
    ] = "",
    filter_regex: Annotated[
        str,
        typer.Option(
            "--filter", help="Regex searched anywhere in the instance ids (a substring works).", show_default="all"
        ),
    ] = "",
    shuffle: Annotated[bool, typer.Option(help="Shuffle (seeded) before filtering and slicing.")] = False,
    output: Annotated[Path, typer.Option("--output", "-o", help="Batch output directory.")] = Path("swebench_output"),
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="Instances run in parallel.")] = 1,
    model: Model = None,
    base_url: BaseUrl = None,
    config: ConfigFiles = None,
    environment: EnvironmentKind = "docker",
    redo_existing: Annotated[bool, typer.Option(help="Run again instances already in preds.json.")] = False,
    cost_limit: Annotated[
        float | None, typer.Option(help="Global cost limit (USD) for the whole batch; 0: none.", show_default="none")
    ] = None,
    step_limit: StepLimit = None,
    checkpoint: Checkpoint = None,
    engine: Engine = "local",
    address: Address = None,
    task_cpus: Annotated[float, typer.Option(min=0, help="--engine ray: CPUs each instance's task asks for.")] = 1.0,
    task_memory: Annotated[
        int, typer.Option(min=0, help="--engine ray: memory (MB) each instance's task asks for.")
    ] = 1024,
    shared_output: Annotated[
        bool,
        typer.Option(help="--engine ray: the nodes see --output (shared filesystem) and write the run folders there."),
    ] = False,
    prefetch_images: Annotated[
        bool, typer.Option(help="--engine ray: every docker node pulls the instances' images before the run.")
    ] = False,
) -> None:
    """Run the agent on SWE-bench instances (resumable: finished instances are skipped, interrupted ones resume)."""
    from llm_ide.swebench.batch import BatchAbandoned, run_swebench
    from llm_ide.swebench.dataset import DatasetError
    from llm_ide.swebench.preflight import SWEbenchError
    from llm_ide.swebench.progress import BatchProgress

    model = _model(model)
    kind = _environment(environment)
    if engine not in ("local", "ray"):
        raise fail(f"unknown engine {engine!r}: use local or ray")
    options = _options(
        model=model,
        output=output,
        workers=workers,
        environment=kind,
        config_files=with_user_config(config),
        base_url=base_url,
        cost_limit=cost_limit,
        checkpoint=checkpoint,
        redo_existing=redo_existing,
        step_limit=step_limit,
        engine=engine,
        ray_address=address,
        task_cpus=task_cpus,
        task_memory_mb=task_memory,
        ray_shared_output=shared_output,
        prefetch_images=prefetch_images,
    )
    install_signal_policy()  # SIGTERM/SIGHUP end runs like Ctrl-C (errors.Terminated)
    try:
        with warnings_on_console():
            summary = run_swebench(
                subset,
                split,
                options,
                slice_spec=slice_spec,
                filter_regex=filter_regex,
                shuffle=shuffle,
                progress_factory=lambda total: BatchProgress(total=total, console=console, title="swebench"),
                before_run=lambda dataset, todo, skipped: _announce(
                    dataset, todo, skipped, kind if engine == "local" else None, filter_regex
                ),
            )
    except (DatasetError, SWEbenchError, ValueError) as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        print_interrupted(f"finished instances are in {output / 'preds.json'}; the others continue where they were")
        if isinstance(interrupt, BatchAbandoned):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(interrupted_exit(interrupt).exit_code)  # the workers are still in their runs; see batch.py
        raise interrupted_exit(interrupt) from None
    ran, finished = len(summary.outcomes), len(summary.skipped_existing)
    console.print(f"{ran} instance{'s' * (ran != 1)} run, {finished} skipped as finished in an earlier run")
    console.print(f"preds: {output / 'preds.json'}  exit statuses: {output / 'exit_statuses.yaml'}")
    console.print(f"log: {output / 'swebench.log'}  trajectories: {output}/<instance id>/")
    if summary.not_started:
        console.print(f"[yellow]global cost limit reached: {len(summary.not_started)} instances not started[/]")
    if summary.outcomes and all(ExitStatus(outcome.exit_status).failed for outcome in summary.outcomes.values()):
        err_console.print(f"[bold red]every instance failed[/] (reasons above and in {output / 'swebench.log'})")
        raise typer.Exit(1)


def _announce(dataset: Any, todo: list[Any], skipped: list[str], kind: str | None, filter_regex: str) -> None:
    """`kind`: the environment to check on this machine (None: the Ray engine checks it on its nodes)."""
    for error in dataset.errors:
        err_console.print(f"[yellow]skipping malformed {error}[/]", soft_wrap=True)
    if not todo and not skipped:
        chosen_by = f"--filter {filter_regex!r}" if filter_regex else "the selection"
        raise fail(f"no instance selected: {chosen_by} matches none of the {len(dataset.instances)} instances")
    if skipped:
        console.print(
            f"{len(skipped)} instance{'s' * (len(skipped) != 1)} skipped as finished in an earlier run "
            "(in preds.json; --redo-existing runs them again)"
        )
    if todo and kind is not None:
        _check_environment(kind)


def swebench_single_command(
    subset: Subset = "lite",
    split: Split = "dev",
    instance: Annotated[str, typer.Option("--instance", "-i", help="Instance id, or its index in the dataset.")] = "0",
    model: Model = None,
    base_url: BaseUrl = None,
    config: ConfigFiles = None,
    environment: EnvironmentKind = "docker",
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory.")] = Path("swebench_single"),
    step_limit: StepLimit = None,
    cost_limit: Annotated[
        float | None,
        typer.Option(help="Cost limit (USD) of this run.", show_default=config_default("agent.cost_limit", "swebench")),
    ] = None,
    checkpoint: Checkpoint = None,
) -> None:
    """Run the agent on one SWE-bench instance, printing its steps live (resumes an interrupted run)."""
    from llm_ide.swebench.batch import OutputStore, batch_config, run_instance
    from llm_ide.swebench.dataset import DatasetError, find_instance, load_dataset
    from llm_ide.swebench.preflight import SWEbenchError, check_model

    model = _model(model)
    kind = _environment(environment)
    options = _options(
        model=model,
        output=output,
        environment=kind,
        config_files=with_user_config(config),
        base_url=base_url,
        checkpoint=checkpoint,
        step_limit=step_limit,
        run_cost_limit=cost_limit,
    )
    try:
        dataset = load_dataset(subset, split)
        chosen = find_instance(dataset.instances, instance)
        check_model(model, batch_config(options), base_url)
    except (DatasetError, SWEbenchError, ValueError) as error:
        raise fail(str(error)) from None
    _check_environment(kind)
    console.print(f"[bold]{chosen.instance_id}[/] ({chosen.image if kind == 'docker' else chosen.repo}) → {output}")
    install_signal_policy()  # SIGTERM/SIGHUP end runs like Ctrl-C (errors.Terminated)
    try:
        with warnings_on_console():
            outcome = run_instance(
                chosen,
                options,
                batch_config(options),
                OutputStore(output),
                on_event=lambda _, event: print_event(event),
            )
    except SWEbenchError as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        print_interrupted(f"saved at its last completed step ({output / chosen.instance_id})")
        raise interrupted_exit(interrupt) from None
    colour = "green" if outcome.exit_status == ExitStatus.SUBMITTED else "yellow"
    console.print(f"[bold {colour}]{outcome.exit_status}[/] after {outcome.steps} steps, ${outcome.cost:.4f}")
    console.print(terminal_safe(outcome.patch) or "(empty patch)", markup=False)
    console.print(f"trajectory: {output / chosen.instance_id / (chosen.instance_id + '.traj.json')}")
    raise typer.Exit(0 if outcome.exit_status == ExitStatus.SUBMITTED else 1)


def evaluate_command(
    predictions: Annotated[Path, typer.Argument(help="preds.json ({id: prediction}) or a .jsonl of predictions.")],
    subset: Subset = "lite",
    split: Split = "dev",
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="Instances evaluated in parallel.")] = 1,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Folder of this evaluation: report.json and logs/<instance id>/ (never one holding another).",
            show_default="evaluations/<predictions name>.<UTC time> beside the predictions",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds per instance's test run.", show_default=config_default("swebench.eval_timeout", "swebench")
        ),
    ] = None,
    config: ConfigFiles = None,
    attempts: Annotated[
        bool,
        typer.Option(help="Also grade every attempt's patch: pass@k beside the chosen patch's resolve rate."),
    ] = False,
    engine: Engine = "local",
    address: Address = None,
) -> None:
    """Apply each predicted patch in its instance's image, run the instance's tests, report the resolve rate."""
    import json

    from llm_ide.cli.evaluation import grade_attempts, report_table
    from llm_ide.config import ConfigError, load_config
    from llm_ide.swebench.dataset import DatasetError, load_dataset
    from llm_ide.swebench.evaluate import EvaluationError, claim_folder, evaluate_predictions, load_predictions

    try:
        settings = load_config("swebench", with_user_config(config)).swebench
        preds = load_predictions(predictions)
        dataset = load_dataset(subset, split)
        folder = claim_folder(output, predictions)
    except (ConfigError, DatasetError, EvaluationError) as error:
        raise fail(str(error)) from None
    for error in dataset.errors:
        err_console.print(f"[yellow]malformed {error}[/]", soft_wrap=True)
    instances = {i.instance_id: i for i in dataset.instances}
    report_path = folder / "report.json"
    where = f"Ray tasks on {address or 'a local one-node cluster'}" if engine == "ray" else f"{workers} workers"
    console.print(f"evaluating {len(preds)} predictions with {where} into {folder}", markup=False)

    def show(result: Any) -> None:
        console.print(terminal_safe(f"  {result.instance_id}: {result.status} {result.detail}".rstrip()), markup=False)

    if engine not in ("local", "ray"):
        raise fail(f"unknown engine {engine!r}: use local or ray")
    try:
        if engine == "ray":
            from llm_ide.swebench.ray_evaluate import evaluate_on_ray

            report = evaluate_on_ray(
                preds,
                instances,
                settings=settings,
                log_dir=folder / "logs",
                address=address,
                workers=workers,
                timeout=timeout,
                on_result=show,
            )
        else:
            report = evaluate_predictions(
                preds,
                instances,
                settings=settings,
                log_dir=folder / "logs",
                workers=workers,
                timeout=timeout,
                on_result=show,
            )
    except EvaluationError as error:
        raise fail(str(error)) from None
    console.print(report_table(report))
    data = report.to_json()
    if attempts:
        data["attempts"] = grade_attempts(report, preds, instances, predictions.parent, settings, folder, workers,
                                          timeout, show)  # fmt: skip
    report_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    console.print(
        f"[bold]resolved {data['resolved']}/{data['total']} ({data['resolve_rate']:.1%})[/], "
        f"unresolved {data['unresolved']}, error {data['error']}, empty patch {data['empty_patch']} — report: "
        f"{report_path}"
    )
    if attempts:
        graded = data["attempts"]
        console.print(
            f"[bold]pass@{graded['k']} {graded['pass_at_k_count']}/{data['total']} ({graded['pass_at_k']:.1%})[/] "
            f"(any attempt resolved); chosen patch resolved {graded['chosen_resolved_count']}/{data['total']} "
            f"({graded['chosen_resolve_rate']:.1%})"
        )
