"""`llm-ide run`: one task in a repository, live steps and reasoning, the patch printed and written."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml
from rich.markup import escape

from llm_ide.cli.console import (
    IN_MEMORY,
    StepPrinter,
    Thoughts,
    check_model_before_start,
    command_line,
    console,
    err_console,
    fail,
    interrupted_exit,
    money,
    navigator_usage,
    print_interrupted,
    usage_text,
    warnings_on_console,
    write_patch,
)
from llm_ide.cli.options import BaseUrl, model_name
from llm_ide.cli.resuming import dropped, kept_configs, resuming_args, task_text
from llm_ide.cli.run_options import (
    Checkpoint,
    CostLimit,
    Environment,
    Image,
    Navigator,
    NavigatorMode,
    Output,
    Repo,
    Reproduction,
    RunConfig,
    RunModel,
    StepLimit,
    Task,
    TaskFile,
    ThreadId,
    Verbose,
)
from llm_ide.cli.status import ThinkingStatus
from llm_ide.errors import LIMITS, ExitStatus, install_signal_policy
from llm_ide.fileio import atomic_write
from llm_ide.terminal import terminal_safe

if TYPE_CHECKING:
    from llm_ide.config import Settings
    from llm_ide.run.outputs import RunResult
    from llm_ide.run.single import Listeners, RunRequest


def environment_kind(environment: str | None, image: str | None) -> str | None:
    """`--image` means the kind that runs from an image: implied when `--environment` is not given, an error with a
    kind that runs in place."""
    from llm_ide.run.usage import imaged_environment

    kind = imaged_environment(environment, image, ("--image", "--environment"))
    if image is not None and environment is None:
        console.print(f"[dim]… --image {escape(image)}: running in {kind}[/]")
    return kind


def run(
    repo: Repo = Path("."),
    task: Task = None,
    task_file: TaskFile = None,
    model: RunModel = None,
    base_url: BaseUrl = None,
    config: RunConfig = None,
    output: Output = None,
    step_limit: StepLimit = None,
    cost_limit: CostLimit = None,
    thread_id: ThreadId = None,
    checkpoint: Checkpoint = None,
    environment: Environment = None,
    image: Image = None,
    navigator: Navigator = None,
    reproduction: Reproduction = None,
    verbose: Verbose = False,
    thoughts: Thoughts = True,
) -> None:
    """Run the agent on one task in a repository; print the patch and write it to <output>/<thread id>.patch. While
    the model thinks, a live line shows the seconds and tokens so far."""
    run_id, thread, text = thread_and_task(output, thread_id, task, task_file, repo)
    repo, given = Path.cwd() if repo == Path(".") else repo, reproduction_variants(reproduction)  # the folder, whole
    again, model = resuming_args(task_file, model, config, thread, base_url), model_name(model)
    kind = environment_kind(environment, image)
    settings = run_settings(kept_configs(config, thread, task_file), step_limit, cost_limit, navigator, verbose)
    repository(repo)  # (after the settings: at every door the preflight checks the limits, then the repository)
    status = ThinkingStatus(console, verbose, err_console)
    from llm_ide.cli.navigator import terminal_asker
    from llm_ide.composition import compose
    from llm_ide.priced import has_price, settings_apart_priced
    from llm_ide.run.single import Listeners, RunRequest

    variants, asked = compose(settings, given), (kind, image)
    check_model_before_start(model, settings, base_url, status.say, variants=variants, environment=asked)
    priced, apart = has_price(model, settings.model.prices), settings_apart_priced(model, settings)
    ask = terminal_asker(settings)
    on_event = StepPrinter(priced, thoughts and not verbose, apart, ANEW)  # -v showed the reply, its reasoning too
    request = RunRequest(
        text,
        model,
        settings,
        thread.parent,
        run_id,
        repo=repo.resolve(),
        environment=kind,
        image=image,
        base_url=base_url,
        checkpoint=checkpoint,
        variants=tuple(given),
    )
    listeners = Listeners(on_event, status, ask, status.command)
    result = run_to_end(request, listeners, status, thread_given=thread_id is not None, args=again)
    code, limits = print_outcome(result, request, priced), limits_file(checkpoint, request.output_dir, run_id)
    raised = higher_limit(result.exit_status, result.model_stats, settings, limits, result.trajectory_path)
    thread = [] if thread_id else ["--thread-id", run_id]
    print_how_it_goes_on(result.exit_status, checkpoint, thread, again, raised, result.trajectory_path)
    raise typer.Exit(code)


def repository(repo: Path) -> None:
    """The preflight's repository check (it needs the path alone), made before the variants and LangGraph are
    imported: a folder that is not there, or no git work tree with a commit, is one line at once."""
    from llm_ide.errors import PreflightError
    from llm_ide.run.repository_check import check_repository

    try:
        check_repository(repo.expanduser())
    except PreflightError as error:
        raise fail(str(error)) from None


def thread_and_task(
    output: Path | None, thread_id: str | None, task: str | None, task_file: Path | None, repo: Path
) -> tuple[str, Path, str]:
    """The run's id (`--thread-id`, else one of the time), `<output>/<id>` (what its files are named after; its
    folder not the repository) and its task (with `--thread-id` and no task given: the run's own)."""
    from llm_ide.run.usage import check_output_folder, check_run_id

    run_id = time.strftime("run-%Y%m%d-%H%M%S") if thread_id is None else thread_id
    check_run_id(run_id)  # an empty one (`--thread-id "$T"`, T unset) too: not a new run in the place of T's
    thread = output_folder(output, run_id) / run_id
    check_output_folder(thread.parent, repo, "--output")
    return run_id, thread, task_text(task, task_file, thread if thread_id else None)


def output_folder(output: Path | None, run_id: str) -> Path:
    """`--output`/`-o`: the run's folder; a name of a JSON file (mini-swe-agent's `-o`, its trajectory file) is
    refused, where it became a folder of that name."""
    from llm_ide.run.usage import refuse_a_json_name

    if output is not None:
        refuse_a_json_name(output, run_id, "-o")
    return output or Path("runs") / run_id


def limits_file(checkpoint: str | None, folder: Path, run_id: str) -> Path | None:
    """Where a run's raised limits go for the command that goes on (a run kept in memory only does not go on)."""
    return None if checkpoint == "memory" else folder / f"{run_id}.limits.yaml"


def spent(stats: dict[str, Any], trajectory: Path | None) -> dict[str, Any]:
    """What a run used as its limits count it: its trajectory's model stats (else `stats`) with what its variants
    paid apart (a navigator's cost and tokens) added, and its `elapsed` seconds."""
    from llm_ide.run.spent import spent_apart, trajectory_info

    info = trajectory_info(trajectory)
    stats, apart = info.get("model_stats") or stats, spent_apart(info)
    added = {key: stats.get(key, 0) + apart[key] for key in ("cost", "input_tokens", "output_tokens")}
    return {**stats, **added, "elapsed": float(info.get("elapsed") or stats.get("elapsed") or 0.0)}


def higher_limit(
    status: ExitStatus, stats: dict[str, Any], settings: Settings, limits: Path | None, trajectory: Path | None = None
) -> tuple[str, list[str]] | None:
    """How a run stopped at one of its limits (`stats`: what it used; its `trajectory`, read by `spent`, adds a
    navigator's part as the limits count it) goes on from its last step: the options that double that limit, or, for a
    limit no option sets, a `--config` file doubling it (written to `limits`); None for another ending (or a limit a
    batch shares); with attempts, the step limit alone (each attempt has its own, the task its budget); no options
    where there is no file to write it in."""
    agent = settings.agent
    if status not in LIMITS:
        return None
    if status == ExitStatus.STEP_LIMIT:
        return "a higher step limit", ["--step-limit", str(2 * agent.step_limit)]
    if settings.attempts.max > 1:  # type: ignore[attr-defined]
        return None
    stats = spent(stats, trajectory)
    if status == ExitStatus.COST_LIMIT and agent.cost_limit and (cost := stats.get("cost", 0.0)) >= agent.cost_limit:
        return "a higher cost limit", ["--cost-limit", f"{doubled(agent.cost_limit, cost):g}"]
    used = stats.get("input_tokens", 0) + stats.get("output_tokens", 0)
    tokens = agent.token_limit and used >= agent.token_limit
    key = "wall_time_limit" if status == ExitStatus.TIME_LIMIT else "token_limit" if tokens else None
    if not key:
        return None
    value = doubled(getattr(agent, key), used if key == "token_limit" else stats["elapsed"])
    if limits is None:
        return f"agent.{key} doubled to {value:g}", []
    atomic_write(limits, yaml.safe_dump({"agent": {key: value}}))
    return f"agent.{key} doubled to {value:g} (a --config file: {limits})", ["-c", str(limits)]


def doubled(limit: float, used: float) -> float:
    """`limit` doubled, again while what the run `used` is not under it (one call can overshoot a limit by more than
    the limit: the command that goes on would stop at once)."""
    value = 2 * limit
    while value <= used:
        value *= 2
    return value


ANEW = "a new --thread-id or output folder"  # what runs a task anew (the Python API: a new `run_id` or `output_dir`)
AGAIN = "the same command starts the task over once that folder can be made (or with another --output)"
OUTLIVING = "a checkpoint that outlives the process (the default, or --checkpoint sqlite:PATH|postgres://…)"
NO_GOING_ON = (
    "its thread was in memory only (--checkpoint memory) and is gone; the same command starts it over, and one with "
    f"{OUTLIVING} can go on after a limit"
)


def print_how_it_goes_on(
    status: ExitStatus,
    checkpoint: str | None,
    thread: list[str],
    args: list[str] | None,
    raised: tuple[str, list[str]] | None,
    trajectory: Path | None = None,
) -> None:
    """A run that stopped short of its end (a model error, say; a limit): the command that resumes it, if it can be;
    a thread kept in memory only cannot (gone with the process), nor one kept in its output folder that could not be
    made again (its `trajectory` not there): the line says so, and how to run so that it can."""
    if checkpoint is None and trajectory is not None and not trajectory.is_file():  # (the run's line said why)
        if status in LIMITS or not ExitStatus(status).finished:
            said = f"the run cannot go on where it stopped: its thread went with {trajectory.parent}; {AGAIN}"
            err_console.print(said, markup=False)
        return
    if raised is not None and checkpoint == "memory":
        err_console.print(f"it cannot go on from its last step with {raised[0]}: {NO_GOING_ON}", markup=False)
    elif raised is not None and raised[1]:
        said, options = raised
        again = options[1] if options[0] == "-c" else None  # the limits file, given again; a limit's option, anew
        given = dropped(sys.argv[1:] if args is None else args, options[0], again)
        err_console.print(f"it goes on from its last step with {said}:")
        err_console.print(command_line(*thread, *options, args=given), markup=False)
    if ExitStatus(status).finished or status == ExitStatus.AWAITING_ANSWER:
        return
    if checkpoint == "memory":
        err_console.print(f"the run stopped ({status}); {IN_MEMORY}")
    else:
        err_console.print(f"the run goes on where it stopped ({status}) with:")
        err_console.print(command_line(*thread, args=args), markup=False)


def run_settings(
    config: list[Path] | None,
    step_limit: int | None,
    cost_limit: float | None,
    navigator: NavigatorMode | None,
    verbose: bool,
) -> Settings:
    """The default config with the user's and the `--config` files, then the keys the options set."""
    from llm_ide.config import ConfigError, load_config, with_user_config

    limits = {k: v for k, v in (("step_limit", step_limit), ("cost_limit", cost_limit)) if v is not None}
    try:
        settings = load_config("default", overrides=with_user_config(config))
        settings = settings.merged({"agent": limits}, origin="command line") if limits else settings
        if navigator is not None:
            settings = settings.merged({"navigator": {"mode": navigator.value}}, origin="command line")
        if verbose:
            settings = settings.merged({"model": {"stream": True}}, origin="command line")
    except ConfigError as error:
        raise fail(str(error)) from None
    return settings


def run_to_end(
    request: RunRequest, listeners: Listeners, status: ThinkingStatus, thread_given: bool, args: list[str] | None = None
) -> RunResult:
    """The run, its warnings above the live line; Ctrl-C (or SIGTERM/SIGHUP) says where it was saved and how to
    resume (`--thread-id`, unless the command line gave it)."""
    from llm_ide.attempts.run import run_at_task
    from llm_ide.run.guard import AnotherRepository, NewThreadSaid
    from llm_ide.run.single import ThreadMismatchError

    install_signal_policy()  # SIGTERM/SIGHUP end runs like Ctrl-C (errors.Terminated)
    try:
        with warnings_on_console(status.say):
            return run_at_task(request, listeners)
    except AnotherRepository as error:
        raise fail(error.said("--repo", "a new --thread-id")) from None
    except NewThreadSaid as error:
        raise fail(error.said("a new --thread-id")) from None
    except ThreadMismatchError as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt as interrupt:
        status.stop()
        saved = request.output_dir / f"{request.run_id}.traj.json"
        thread = [] if thread_given else ["--thread-id", request.run_id]
        note, where = f"saved at its last completed step ({saved})", {"checkpoint": request.checkpoint, "args": args}
        print_interrupted(note, *thread, **where, trajectory=saved)
        raise interrupted_exit(interrupt) from None


def print_outcome(result: RunResult, request: RunRequest, priced: bool) -> int:
    """The patch (printed, and written beside the trajectory) and the run's report; the exit code: 0 submitted, 1
    another ending, 2 an environment that could not start (nothing to show but the report)."""
    if result.exit_status == ExitStatus.ENVIRONMENT_ERROR and not result.model_stats["api_calls"]:
        report(result, priced)
        return 2  # the environment could not start: a set-up problem, told in one line above
    done = [a for a in getattr(result, "attempts", []) if a["exit_status"] == ExitStatus.SUBMITTED]
    if done and not result.submission.strip() and not ExitStatus(result.exit_status).finished:
        said = f"none chosen yet: the run stopped before it chose among its attempts ({len(done)} submitted)"
        console.print(f"[bold]patch:[/] {said}")  # (an empty patch would say the attempts found nothing)
    else:
        write_patch(result.submission, request.output_dir / f"{request.run_id}.patch")
    report(result, priced)
    return 0 if result.exit_status == ExitStatus.SUBMITTED else 1


def reproduction_variants(path: Path | None) -> list:
    """`--reproduction FILE`: the script given with the task."""
    if path is None:
        return []
    if path.is_dir():
        raise fail(f"reproduction script {path} is a folder: give one script (Python, or .sh)")
    if not path.is_file():
        raise fail(f"reproduction script not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise fail(f"reproduction script {path}: not UTF-8 text") from None
    if not text.strip():
        raise fail(f"reproduction script {path} is empty: it would show nothing of the issue")
    from llm_ide.reproduction.script import script
    from llm_ide.reproduction.variant import Reproduction

    return [Reproduction(script(text, path.name))]


def reproduction_lines(trajectory: Path) -> list[str]:
    """What each reproduction showed on the original code and at submit, from the run's trajectory."""
    try:
        record = json.loads(trajectory.read_text(encoding="utf-8"))["info"].get("reproduction") or {}
    except (OSError, ValueError, KeyError, AttributeError):
        return []
    after = record.get("after") or {}
    return [
        f"reproduction {item['name']}: {item['before']['verdict']} on the original code"
        + (f", {after[item['name']]['verdict']} at submit" if item["name"] in after else "")
        for item in record.get("scripts") or []
    ]


def report(result, priced: bool = True) -> None:
    from llm_ide.priced import apart_priced
    from llm_ide.run.spent import trajectory_info

    colour = "green" if result.exit_status == ExitStatus.SUBMITTED else "yellow"
    navigator = navigator_usage(info := trajectory_info(result.trajectory_path))
    used = usage_text(result.model_stats, priced, navigator)
    console.print(f"[bold {colour}]{result.exit_status}[/] after {escape(used)}")
    for line in reproduction_lines(result.trajectory_path):
        console.print(line, markup=False)
    for attempt in getattr(result, "attempts", []):
        score = "not reviewed" if attempt["score"] is None else f"score {attempt['score']:g}"
        chosen = " [bold](chosen)[/]" if attempt["chosen"] else ""
        spent = money(attempt["cost"] + attempt.get("cost_apart", 0.0), priced, apart_priced(info))
        console.print(f"attempt {attempt['index']}: {attempt['exit_status']}, {score}, {spent}{chosen}")
    if rest := attempts_rest(result, navigator):  # what the lines above do not hold: the reviews and the choice
        console.print(f"reviews and choice: {money(rest, priced)}")
    if result.error:
        err_console.print(f"[red]{escape(terminal_safe(result.error))}[/]")
    path = result.trajectory_path
    console.print(f"trajectory: {path}" if path.is_file() else f"trajectory: none, it could not be written ({path})")


def attempts_rest(result, navigator: dict[str, Any]) -> float:
    """The cost of a run with attempts that its attempts' lines do not hold (its reviewer's and chooser's calls): the
    lines and it sum to the run's total."""
    attempts = getattr(result, "attempts", [])
    lines = sum(attempt["cost"] + attempt.get("cost_apart", 0.0) for attempt in attempts)
    rest = result.model_stats.get("cost", 0.0) + navigator.get("cost", 0.0) - lines
    return rest if attempts and rest >= 0.00005 else 0.0
