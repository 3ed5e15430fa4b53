"""`llm-ide swebench` and `llm-ide swebench-single` (also `mini-extra swebench[-single]`)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from llm_ide.cli.console import (
    StepPrinter,
    Thoughts,
    check_model_before_start,
    command_line,
    console,
    err_console,
    fail,
    interrupted_exit,
    money,
    navigator_text,
    navigator_usage,
    print_interrupted,
    warnings_on_console,
)
from llm_ide.cli.options import (
    Address,
    BaseUrl,
    BatchCostLimit,
    BatchOutput,
    BatchWorkers,
    Checkpoint,
    ConfigFiles,
    Engine,
    EnvironmentKind,
    Filter,
    Instance,
    Model,
    PrefetchImages,
    RedoExisting,
    Repos,
    RunCostLimit,
    SharedOutput,
    Shuffle,
    SingleOutput,
    Slice,
    Split,
    StepLimit,
    Subset,
    TaskCpus,
    TaskMemory,
    check_engine,
    model_name,
)
from llm_ide.cli.resuming import dropped, kept_configs, resuming_args
from llm_ide.cli.run import OUTLIVING, higher_limit
from llm_ide.cli.run_options import Verbose
from llm_ide.cli.status import ThinkingStatus
from llm_ide.errors import ExitStatus, install_signal_policy
from llm_ide.terminal import terminal_safe

if TYPE_CHECKING:
    from llm_ide.swebench.batch import Selection
    from llm_ide.swebench.choice import BatchOptions


def _options(**values: Any) -> Any:
    from llm_ide.config import ConfigError
    from llm_ide.swebench.choice import BatchOptions, batch_config

    step_limit, run_cost_limit = values.pop("step_limit", None), values.pop("run_cost_limit", None)
    agent = {k: v for k, v in (("step_limit", step_limit), ("cost_limit", run_cost_limit)) if v is not None}
    options = BatchOptions(**values)
    try:
        settings = batch_config(options)
        if agent:  # checked as `run` checks its limits: the command line's, named so
            settings.merged({"agent": agent}, origin="command line")
    except ConfigError as error:
        raise fail(str(error)) from None
    return replace(options, config_values={"agent": agent}) if agent else options


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
    slice_spec: Slice = "",
    filter_regex: Filter = "",
    shuffle: Shuffle = False,
    output: BatchOutput = Path("swebench_output"),
    workers: BatchWorkers = 1,
    model: Model = None,
    base_url: BaseUrl = None,
    config: ConfigFiles = None,
    environment: EnvironmentKind = "docker",
    redo_existing: RedoExisting = False,
    cost_limit: BatchCostLimit = None,
    step_limit: StepLimit = None,
    checkpoint: Checkpoint = None,
    engine: Engine = "local",
    address: Address = None,
    task_cpus: TaskCpus = 1.0,
    task_memory: TaskMemory = 1024,
    shared_output: SharedOutput = False,
    prefetch_images: PrefetchImages = False,
    repos: Repos = None,
) -> None:
    """Run the agent on SWE-bench instances (resumable: finished instances are skipped, interrupted ones resume)."""
    from llm_ide.config import with_user_config

    again, model = resuming_args(None, model, config, output / "swebench", base_url), model_name(model)
    kind = environment
    check_engine(engine, {"--address": address, "--shared-output": shared_output, "--prefetch-images": prefetch_images})
    options = _options(
        model=model,
        output=output,
        workers=workers,
        environment=kind,
        config_files=with_user_config(kept_configs(config, output / "swebench")),
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
        repos=local_repos(repos, kind),
    )
    checked = kind if engine == "local" else None  # the Ray engine checks it on its nodes
    summary = run_batch(subset, split, options, checked, (slice_spec, filter_regex, shuffle), again)
    print_batch(summary, output)
    print_going_on([o.exit_status for o in summary.outcomes.values()], options, again)


def run_batch(
    subset: str, split: str, options: BatchOptions, kind: str | None, chosen: tuple[str, str, bool], again: list[str]
) -> Any:
    """The batch with its progress; `kind`: the environment to check here once the instances are chosen; `chosen`:
    --slice, --filter, --shuffle; `again`: the command line that resumes it. Interrupted: the finished instances stay,
    the others resume where they were next time."""
    from llm_ide.priced import has_price, settings_apart_priced
    from llm_ide.swebench.choice import BatchAbandoned, batch_config, choose
    from llm_ide.swebench.progress import BatchProgress

    priced, (slice_spec, filter_regex, _) = has_price(options.model, batch_config(options).model.prices), chosen
    apart = settings_apart_priced(options.model, batch_config(options))
    install_signal_policy()  # SIGTERM/SIGHUP end runs like Ctrl-C (errors.Terminated)
    try:
        instances = choose(subset, split, options.output, *chosen)
        from llm_ide.swebench.batch import run_chosen  # (the run's imports: once the instances are chosen)

        with warnings_on_console():
            return run_chosen(
                instances,
                options,
                progress_factory=lambda total: BatchProgress(total, console, "swebench", priced=priced, apart=apart),
                before_run=lambda selection: _announce(selection, kind, (filter_regex, slice_spec), options.repos),
            )
    except ValueError as error:  # (a DatasetError, a SWEbenchError: ValueErrors too)
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        others = "start over (--checkpoint memory)" if options.checkpoint == "memory" else "continue where they were"
        print_interrupted(f"finished instances are in {options.output / 'preds.json'}; the others {others}", args=again)
        if isinstance(interrupt, BatchAbandoned):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(interrupted_exit(interrupt).exit_code)  # the workers are still in their runs; see batch.py
        raise interrupted_exit(interrupt) from None


def print_batch(summary: Any, output: Path) -> None:
    """What ran, where it went; a batch whose every instance failed exits 1."""
    console.print(summary.said())
    preds = output / "preds.json" if (output / "preds.json").exists() else "none (no instance has a prediction yet)"
    console.print(f"preds: {preds}  exit statuses: {output / 'exit_statuses.yaml'}")
    console.print(f"log: {output / 'swebench.log'}  trajectories: {output}/<instance id>/")
    if summary.not_started:
        before = f", {money(summary.spent_before)} of it by earlier runs in {output}" if summary.spent_before else ""
        console.print(
            f"[yellow]global cost limit reached (spent {money(summary.spent)}{before}): "
            f"{len(summary.not_started)} instance{'s' * (len(summary.not_started) != 1)} not started[/]"
        )
    if summary.outcomes and all(ExitStatus(outcome.exit_status).failed for outcome in summary.outcomes.values()):
        err_console.print(f"[bold red]every instance failed[/] (reasons above and in {output / 'swebench.log'})")
        raise typer.Exit(1)


BATCH_WAYS = {
    ExitStatus.STEP_LIMIT: "a higher --step-limit",
    ExitStatus.COST_LIMIT: "a --config file raising agent.cost_limit or agent.token_limit (or a higher --cost-limit)",
    ExitStatus.TIME_LIMIT: "a --config file raising agent.wall_time_limit",
}


def print_going_on(statuses: list[str], options: BatchOptions, again: list[str]) -> None:
    """Instances stopped at a limit: what makes them go on from their last step (the same command, the limit raised;
    only a step limit stopped them: that command, the limit doubled)."""
    from llm_ide.swebench.choice import batch_config

    stopped = Counter(ExitStatus(status) for status in statuses if status in BATCH_WAYS)
    raised = higher_limit(ExitStatus.STEP_LIMIT, {}, batch_config(options), None)
    if not stopped or raised is None:
        return
    count, said = sum(stopped.values()), ", or ".join(BATCH_WAYS[status] for status in sorted(stopped))
    whose = f"{count} instance{'s' * (count != 1)} stopped at a limit", "its" if count == 1 else "their"
    if options.checkpoint == "memory":
        threads, are, them = ("threads were", "are", "them") if count > 1 else ("thread was", "is", "it")
        gone = f"{whose[1]} {threads} in memory only (--checkpoint memory) and {are} gone"
        said = f"the same command skips {them} as finished; a batch with {OUTLIVING} can go on"
        console.print(f"{whose[0]}: {gone}; {said} after a limit", markup=False)
        return
    console.print(f"{whose[0]}: the same command with {said} goes on from {whose[1]} last step")
    if set(stopped) == {ExitStatus.STEP_LIMIT}:
        console.print(command_line(*raised[1], args=dropped(again, raised[1][0])), markup=False)


def _announce(selection: Selection, kind: str | None, chosen: tuple[str, str], repos: Path | None) -> None:
    """`kind`: the environment to check on this machine (None: the Ray engine checks it on its nodes); `chosen`: the
    --filter and --slice given; `repos`: every instance to run must be there."""
    dataset, todo, skipped, going_on = selection.dataset, selection.todo, selection.skipped, selection.going_on
    for error in dataset.errors:
        err_console.print(f"[yellow]skipping malformed {error}[/]", soft_wrap=True)
    if not todo and not skipped:
        parts = [f"{option} {value!r}" for option, value in zip(("--filter", "--slice"), chosen, strict=True) if value]
        chosen_by = " with ".join(parts) or "the selection"
        raise fail(f"no instance selected: {chosen_by} matches none of the {dataset.counted()}")
    if skipped:
        console.print(
            f"{len(skipped)} instance{'s' * (len(skipped) != 1)} skipped as finished in an earlier run "
            "(in preds.json; --redo-existing runs them again)"
        )
    if stopped := [instance_id for instance_id, how in going_on.items() if how == "limits"]:
        console.print(
            f"{len(stopped)} instance{'s' * (len(stopped) != 1)} stopped at a limit in an earlier run "
            f"go{'es' * (len(stopped) == 1)} on from {'its' if len(stopped) == 1 else 'their'} last step, under the "
            "limits given now"
        )
    if more := [instance_id for instance_id, how in going_on.items() if how == "more"]:
        one = len(more) == 1
        console.print(
            f"{len(more)} instance{'s' * (not one)} finished in an earlier run with no attempt accepted "
            f"get{'s' * one} more attempts, up to attempts.max"
        )
    if todo and kind is not None:
        _check_environment(kind)
    if repos is not None:
        check_sources(todo, repos)


def local_repos(repos: Path | None, kind: str) -> Path | None:
    """`--repos`: a folder, for an environment that checks the repository out on this machine."""
    from llm_ide.environments import capabilities

    if repos is None:
        return None
    if capabilities(kind).ephemeral:
        raise fail(f"--repos gives the repositories of --environment local: the {kind} one runs from the images")
    if not repos.is_dir():
        raise fail(f"--repos {repos}: no such folder")
    return repos.absolute()


def check_sources(todo: list[Any], repos: Path) -> None:
    """Every instance to run has its bundle or clone in `repos`: else one line naming the missing, before any runs."""
    from llm_ide.swebench.preflight import SWEbenchError, local_source

    missing = []
    for instance in todo:
        try:
            local_source(instance, repos)
        except SWEbenchError:
            missing.append(instance.instance_id.rsplit("-", 1)[0])
    if missing:
        names = sorted(set(missing))
        raise fail(f"--repos {repos} holds no bundle or clone for {', '.join(names)} (<owner>__<name>.bundle or dir)")


def swebench_single_command(
    subset: Subset = "lite",
    split: Split = "dev",
    instance: Instance = "0",
    model: Model = None,
    base_url: BaseUrl = None,
    config: ConfigFiles = None,
    environment: EnvironmentKind = "docker",
    output: SingleOutput = Path("swebench_single"),
    step_limit: StepLimit = None,
    cost_limit: RunCostLimit = None,
    checkpoint: Checkpoint = None,
    repos: Repos = None,
    verbose: Verbose = False,
    thoughts: Thoughts = True,
) -> None:
    """Run the agent on one SWE-bench instance, printing its steps live (resumes an interrupted run). While the model
    thinks, a live line shows the seconds and tokens so far."""
    from llm_ide.cli.run import limits_file, print_how_it_goes_on
    from llm_ide.config import deep_merge, with_user_config
    from llm_ide.priced import has_price, settings_apart_priced
    from llm_ide.run.spent import trajectory_info
    from llm_ide.swebench.choice import batch_config

    again, model = resuming_args(None, model, config, output / "swebench-single", base_url), model_name(model)
    options = _options(
        model=model,
        output=output,
        environment=environment,
        config_files=with_user_config(kept_configs(config, output / "swebench-single")),
        base_url=base_url,
        checkpoint=checkpoint,
        step_limit=step_limit,
        run_cost_limit=cost_limit,
        repos=local_repos(repos, environment),
    )
    if verbose:
        options = replace(options, config_values=deep_merge(options.config_values, {"model": {"stream": True}}))
    chosen, source = chosen_instance(subset, split, instance, environment, options.repos)
    settings = batch_config(options)
    check_model_before_start(model, settings, base_url, timeout=5.0, environment=None)  # rows' images
    _check_environment(environment)
    console.print(f"[bold]{chosen.instance_id}[/] ({source}) → {output}")
    priced, apart = has_price(model, settings.model.prices), settings_apart_priced(model, settings)
    status = ThinkingStatus(console, verbose, err_console)
    outcome = run_single(chosen, options, StepPrinter(priced, thoughts and not verbose, apart), again, status)
    colour = "green" if outcome.exit_status == ExitStatus.SUBMITTED else "yellow"
    trajectory = output / outcome.details["trajectory"] if "trajectory" in outcome.details else None
    steps = f"{outcome.steps} step{'s' * (outcome.steps != 1)}"
    info = trajectory_info(trajectory)
    driver = (info.get("model_stats") or {}).get("cost", outcome.cost)  # (its cost has the navigator's: said apart)
    spent = money(driver, priced) + navigator_text(navigator_usage(info), priced)
    console.print(f"[bold {colour}]{outcome.exit_status}[/] after {steps}, {spent}")
    console.print(terminal_safe(outcome.patch) or "(empty patch)", markup=False)
    console.print(f"trajectory: {output / chosen.instance_id / (chosen.instance_id + '.traj.json')}")
    limits = limits_file(checkpoint, output / chosen.instance_id, chosen.instance_id)
    raised = higher_limit(outcome.exit_status, outcome.details, settings, limits, trajectory)
    print_how_it_goes_on(outcome.exit_status, checkpoint, [], again, raised)
    unstarted = outcome.exit_status == ExitStatus.ENVIRONMENT_ERROR and not outcome.steps  # as `llm-ide run`: 2
    raise typer.Exit(0 if outcome.exit_status == ExitStatus.SUBMITTED else 2 if unstarted else 1)


def chosen_instance(subset: str, split: str, instance: str, kind: str, repos: Path | None) -> tuple[Any, str]:
    """`--instance` in the dataset, and what its run starts from: its image, or its repository here."""
    from llm_ide.environments import capabilities
    from llm_ide.swebench.dataset import find_instance, load_dataset

    try:
        chosen = find_instance(load_dataset(subset, split), instance)
        if capabilities(kind).image:
            return chosen, chosen.image
        from llm_ide.swebench.preflight import local_source  # (the run's preflight: once the instance is found)

        return chosen, local_source(chosen, repos)
    except ValueError as error:  # (a DatasetError, a SWEbenchError: ValueErrors too)
        raise fail(str(error)) from None


def run_single(chosen: Any, options: BatchOptions, steps: StepPrinter, again: list[str], status: ThinkingStatus) -> Any:
    """One instance's run, its steps printed live (its model calls and commands on `status`'s line); interrupted:
    saved at its last completed step (`again`: the command line that resumes it)."""
    from llm_ide.run.single import Listeners
    from llm_ide.swebench.batch import OutputStore, batch_config, run_instance
    from llm_ide.swebench.preflight import SWEbenchError

    printer = replace(steps, anew="another --output")  # what runs an instance it had finished anew
    install_signal_policy()  # SIGTERM/SIGHUP end runs like Ctrl-C (errors.Terminated)
    try:
        with warnings_on_console():
            return run_instance(
                chosen,
                options,
                batch_config(options),
                OutputStore(options.output),
                on_event=lambda _, event: printer(event),
                told=Listeners(on_model_call=status, on_command=status.command),
            )
    except SWEbenchError as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        status.stop()
        folder = options.output / chosen.instance_id
        trajectory = folder / f"{chosen.instance_id}.traj.json"
        saved = f"saved at its last completed step ({folder})"
        print_interrupted(saved, checkpoint=options.checkpoint, args=again, trajectory=trajectory)
        raise interrupted_exit(interrupt) from None
