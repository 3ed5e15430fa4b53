"""One SWE-bench instance's run and outcome (run_task, or attempts, in its own folder), and the log and summary of a
batch of them (its options: swebench/choice.py): what the thread-pool engine (swebench/batch.py) and the Ray one
(swebench/ray_*.py) share."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_ide.attempts.run import run_at_task
from llm_ide.environments import capabilities
from llm_ide.errors import EnvironmentFailure, ExitStatus, StoreLost, ending, not_started, usd
from llm_ide.keep import Keep
from llm_ide.priced import apart_priced, cost_text, has_price
from llm_ide.reproduction.script import script
from llm_ide.reproduction.variant import Reproduction
from llm_ide.run.checkpoint import out_of_reach, without_password
from llm_ide.run.guard import NewThreadSaid
from llm_ide.run.logfile import QuietFileHandler
from llm_ide.run.pg_thread import is_postgres
from llm_ide.run.request import RunRequest
from llm_ide.run.single import Listeners
from llm_ide.run.spent import spent_apart, trajectory_info
from llm_ide.swebench.choice import BatchOptions
from llm_ide.swebench.dataset import Instance
from llm_ide.swebench.preflight import clone_for_local
from llm_ide.swebench.progress import one_line
from llm_ide.swebench.store import OutputStore, output_folder
from llm_ide.whole_settings import Settings
from llm_ide.workspace.history import ours

log = logging.getLogger("llm_ide.swebench")

BATCH_LOG = "swebench.log"


@dataclass
class Outcome:
    instance_id: str
    exit_status: ExitStatus | None  # None: not started (the batch's budget was spent, or it was stopped first)
    cost: float = 0.0
    steps: int = 0
    patch: str = ""
    error: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # exit_statuses.yaml's fields for this instance
    node: str = ""  # the Ray node that ran it (--engine ray)


@dataclass
class BatchSummary:
    output: Path
    selected: list[str]
    skipped_existing: list[str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    not_started: list[str] = field(default_factory=list)
    row_errors: list[str] = field(default_factory=list)
    spent_before: float = 0.0  # what the earlier runs in its output folder spent (its cost limit counts it)
    spent: float = 0.0  # what its cost limit counted at its end: the earlier runs' and this batch's calls
    resumed: list[str] = field(default_factory=list)  # those of `selected` that went on from their checkpoint
    lost: str = ""  # why the batch stopped before its end: its checkpoint store out of reach (`say_store_lost`)

    def said(self) -> str:
        """What ran (resumed, new) and what was skipped: the console's line and swebench.log's last."""
        ran, skipped = len(self.outcomes), len(self.skipped_existing)
        resumed = len(set(self.resumed) & set(self.outcomes))
        how = f" ({resumed} resumed, {ran - resumed} new)" if ran else ""
        return f"{ran} instance{'s' * (ran != 1)} run{how}, {skipped} skipped as finished in an earlier run"

    @property
    def cost(self) -> float:
        return sum(outcome.cost for outcome in self.outcomes.values())

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome.exit_status] = counts.get(outcome.exit_status, 0) + 1
        return dict(sorted(counts.items()))


EventSink = Callable[[str, Any], None]


def unfinished(outcome: Outcome) -> bool:
    """Interrupted runs, runs that failed on our side (`error`: a full disk, a crash, a patch that could not be
    extracted), runs whose environment never came up and runs the batch's cost limit refused their first model call
    (spent by the others meanwhile) stay out of preds.json: a rerun resumes them."""
    status = outcome.exit_status
    return (
        status in (ExitStatus.INTERRUPTED, ExitStatus.ERROR)
        or (status == ExitStatus.ENVIRONMENT_ERROR and outcome.steps == 0)
        or refused_at_once(outcome)
    )


def refused_at_once(outcome: Outcome) -> bool:
    """The batch's cost limit refused the run's first model call (the other runs spent the rest meanwhile): no call
    made, the driver's nor a variant's of its own (a navigator's plan that spent the run's limit is work done)."""
    calls = outcome.details.get("api_calls"), outcome.details.get("calls_apart")
    return outcome.exit_status == ExitStatus.COST_LIMIT and calls == (0, None)


def run_instance(
    instance: Instance,
    options: BatchOptions,
    settings: Settings,
    store: OutputStore,
    *,
    budget: Any = None,
    on_event: EventSink | None = None,
    stop: threading.Event | None = None,
    told: Listeners | None = None,
) -> Outcome:
    """Run one instance with run_task (resuming its checkpoint when it has one) and record its prediction (`told`:
    who else hears its model calls and commands, e.g. a console's live line)."""
    run_dir = options.output / instance.instance_id
    outcome = execute_instance(
        instance, options, settings, run_dir, budget=budget, on_event=on_event, stop=stop, told=told
    )
    record_outcome(store, options.model, outcome)
    return outcome


def execute_instance(
    instance: Instance,
    options: BatchOptions,
    settings: Settings,
    run_dir: Path,
    *,
    budget: Any = None,
    on_event: EventSink | None = None,
    stop: Any = None,
    intents: Any = None,
    keep: Keep | None = None,
    told: Listeners | None = None,
) -> Outcome:
    """Run one instance in `run_dir` (its thread resumed when it has a checkpoint); nothing shared is written (the
    driver's `record_outcome` does it). `stop`: anything with `is_set()`; `intents`, `keep`: the run folder's intent log
    and models' keep replaced (e.g. in Postgres); `told`: run_instance's. Attempts: the chosen one's patch."""
    kind = capabilities(options.environment)
    repo = None if kind.ephemeral else local_checkout(instance, options, run_dir)  # worked on in place
    settings = settings if kind.ephemeral else ours(settings)  # our checkout: its future removed, as in docker
    request = RunRequest(
        task=instance.problem_statement,
        model=options.model,
        settings=settings,
        output_dir=run_dir,
        run_id=instance.instance_id,
        repo=repo,
        environment=options.environment,
        image=instance.image if kind.image else None,
        base_url=options.base_url,
        checkpoint=options.checkpoint,
        task_vars=instance.task_vars(),
        cost_budget=budget,
        variants=(Reproduction(script(instance.reproduction)),) if instance.reproduction else (),
        intents=intents,
        keep=keep,
    )
    steps, costs = dict[str, int](), dict[str, float]()  # each of its runs' steps and cost so far (an attempt's own)

    def forward(event: Any) -> None:
        done = event.step if event.kind in ("step", "end") else 0  # (a command's or a rejection's: the step under way)
        steps[event.run_id] = max(steps.get(event.run_id, 0), done)
        costs[event.run_id] = max(costs.get(event.run_id, 0.0), event.cost)
        if on_event is not None:
            on_event(instance.instance_id, replace(event, cost=sum(costs.values())))
        if stop is not None and stop.is_set() and event.kind != "end":
            raise KeyboardInterrupt  # the run ends as `interrupted` (container removed, state saved)

    log.info("%s: starting (%s)", instance.instance_id, f"checkout {repo}" if repo else f"image {instance.image}")
    try:
        result = run_at_task(request, replace(told or Listeners(), on_event=forward))
    except KeyboardInterrupt as interrupt:  # (not the batch's stop: raised again)
        return interrupted(instance, interrupt, stop, sum(steps.values()), sum(costs.values()))  # every attempt's
    except NewThreadSaid as error:  # its thread id is the instance's: a new thread is in another folder or store
        return refused(instance, error, "another --output" + " and --checkpoint" * bool(options.checkpoint))
    priced = has_price(options.model, settings.model.prices)
    outcome = outcome_of(instance, options, result, sum(steps.values()), priced)  # (its steps: every attempt's)
    if refused_at_once(outcome):  # nothing was done: the run's folder goes, and a rerun starts the instance anew
        shutil.rmtree(run_dir, ignore_errors=True)
        outcome.details.pop("trajectory", None)
    return outcome


def refused(instance: Instance, error: NewThreadSaid, new: str) -> Outcome:
    """An instance whose run refused its thread (of another task, or kind of run), `new` the batch's way to a new one:
    an error, retried on the next run."""
    reason = error.said(new)
    outcome = Outcome(instance.instance_id, ending(error)[0], error=reason, details={"error": reason})
    log_outcome(outcome, "0 steps")
    return outcome


def interrupted(instance: Instance, interrupt: KeyboardInterrupt, stop: Any, steps: int, cost: float) -> Outcome:
    """An instance the batch's stop interrupted: it resumes on the next run (another interrupt is raised again)."""
    if stop is None or not stop.is_set():
        raise interrupt
    log.warning("%s: interrupted after %d steps; it resumes on the next run", instance.instance_id, steps)
    return Outcome(instance.instance_id, ending(interrupt)[0], cost=cost, steps=steps)


def local_checkout(instance: Instance, options: BatchOptions, run_dir: Path) -> Path:
    """The instance's checkout in its run folder; where it fails, no empty folder left for an instance never started."""
    fresh = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        return clone_for_local(instance, run_dir / "repo", options.repos)
    except BaseException:
        if fresh:
            with suppress(OSError):
                run_dir.rmdir()
        raise


def outcome_of(instance: Instance, options: BatchOptions, result: Any, steps: int, priced: bool) -> Outcome:
    stats = result.model_stats or {}
    trajectory = result.trajectory_path
    info = trajectory_info(trajectory)
    apart = spent_apart(info)  # a navigator's, its attempts' too
    cost = float(stats.get("cost", 0.0)) + apart["cost"]
    outcome = Outcome(
        instance.instance_id,
        result.exit_status,
        cost=cost,
        steps=steps,
        patch=result.submission or "",
        error=getattr(result, "error", ""),
        details={
            "cost": cost,
            "api_calls": int(stats.get("api_calls", 0)),
            **({"calls_apart": apart["api_calls"]} if apart["api_calls"] else {}),
            "patch_lines": (result.submission or "").count("\n"),
            "trajectory": str(trajectory.relative_to(options.output))
            if trajectory.is_relative_to(options.output)
            else f"{instance.instance_id}/{trajectory.name}",
        },
    )
    if outcome.error:
        outcome.details["error"] = one_line(outcome.error)
    cost = cost_text(outcome.cost, priced, apart_priced(info))  # (a model without a price: unknown, not $0)
    log_outcome(outcome, f"cost {cost}, {outcome.patch.count(chr(10))} patch lines")
    return outcome


def store_out_of_reach(options: BatchOptions, outcome: Outcome | None = None) -> str:
    """After an instance that did not finish (interrupted, an error; None: one that raised): why the batch's Postgres
    checkpoint store is out of reach, '' when it is not (or is no Postgres). The batch stops there."""
    unfinished = outcome is None or outcome.exit_status in (ExitStatus.INTERRUPTED, ExitStatus.ERROR)
    if not is_postgres(options.checkpoint) or not unfinished or not (why := out_of_reach(str(options.checkpoint))):
        return ""
    return f"the checkpoint store {without_password(str(options.checkpoint))} is out of reach: {why}"


def not_opened(instance: Instance, why: str) -> Outcome:
    """An instance whose run could not open the batch's lost store: interrupted before its first step (resumable)."""
    status, reason = ending(StoreLost(why))
    return Outcome(instance.instance_id, status, error=reason, details={"error": reason})


def say_store_lost(summary: BatchSummary, why: str) -> None:
    """The batch stopped at its store's loss (`why`): said in its log, with the instances it leaves to the rerun."""
    cut = sorted(i for i, outcome in summary.outcomes.items() if outcome.exit_status == ExitStatus.INTERRUPTED)
    counts = f"{len(cut)} instance{'s' * (len(cut) != 1)} interrupted, {len(summary.not_started)} not started"
    summary.lost = f"{why}; the batch stopped ({counts}): the same command goes on with them once the store is back"
    names = [", ".join(ids) or "none" for ids in (cut, sorted(summary.not_started))]
    log.error("batch: stopped: %s; interrupted: %s; not started: %s", why, *names)


def record_not_started(store: OutputStore, instance_ids: list[str]) -> None:
    """exit_statuses.yaml lists each instance the batch never started (its budget spent, its store lost, Ctrl-C) as
    `not_started`, unless an earlier run recorded how it ended (and what it paid)."""
    unrun = {instance_id: not_started() for instance_id in instance_ids}
    try:
        store.write_statuses(lambda instances: instances | {i: info for i, info in unrun.items() if i not in instances})
    except OSError as error:  # a full disk: the rerun runs them all the same
        log.error("batch: exit_statuses.yaml not updated with the instances not started: %s", error)


def log_not_started(limit: float, spent: float, count: int) -> None:
    """In the batch's log, while it is open (the console says it its own way)."""
    log.warning(
        "batch: global cost limit %s reached (spent %s, earlier runs in this folder included); %d instance%s not "
        "started",
        *(usd(limit), usd(spent), count, "s" * (count != 1)),
    )


def not_checked_out(instance: Instance, error: Exception) -> Outcome:
    """An instance whose repository could not be checked out here (its bundle lacks the base commit): as a container
    that never started, an environment error retried on the next run."""
    status, reason = ending(EnvironmentFailure(str(error).removeprefix(f"{instance.instance_id}: ")))
    return Outcome(instance.instance_id, status, error=reason, details={"error": reason})


def log_outcome(outcome: Outcome, facts: str) -> None:
    """swebench.log: how an instance ended, and why when it failed (a warning)."""
    reason = f": {one_line(outcome.error)}" if outcome.error else ""
    level = logging.WARNING if outcome.error else logging.INFO
    log.log(level, "%s: %s (%s)%s", outcome.instance_id, outcome.exit_status, facts, reason)


def record_outcome(store: OutputStore, model: str, outcome: Outcome) -> None:
    """preds.json (finished runs only) and exit_statuses.yaml for one instance's outcome."""
    if outcome.exit_status == ExitStatus.INTERRUPTED and not outcome.details:
        store.record_status(outcome.instance_id, outcome.exit_status, steps=outcome.steps, cost=outcome.cost)
        return
    if not unfinished(outcome):
        store.add_prediction(outcome.instance_id, model, outcome.patch)
    store.record_status(outcome.instance_id, outcome.exit_status, **outcome.details)


@contextmanager
def batch_log(output: Path) -> Iterator[None]:
    output_folder(output)
    handler = QuietFileHandler(output / BATCH_LOG, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    previous = log.level
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(previous)
        handler.close()
