"""SWE-bench batch runner: instances → run_task (one container each) → preds.json, exit statuses, trajectories."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_ide.attempts.context import attempts_database
from llm_ide.attempts.limits import task_going_on
from llm_ide.budget import CostBudget
from llm_ide.composition import compose
from llm_ide.errors import LIMITS, StoreLost, crashed
from llm_ide.run.checkpoint import open_checkpointer
from llm_ide.run.pg_thread import is_postgres, prepare_postgres
from llm_ide.run.single import past_its_limit
from llm_ide.run.stopping import Commands
from llm_ide.run.thread import thread_database, thread_values
from llm_ide.swebench.choice import BatchAbandoned, BatchOptions, Chosen, batch_config, choose
from llm_ide.swebench.dataset import Dataset, Instance
from llm_ide.swebench.instances import (
    BATCH_LOG,
    BatchSummary,
    Outcome,
    batch_log,
    execute_instance,
    log_not_started,
    log_outcome,
    not_checked_out,
    not_opened,
    record_not_started,
    record_outcome,
    run_instance,
    say_store_lost,
    store_out_of_reach,
)
from llm_ide.swebench.preflight import (
    SWEbenchError,
    check_model,
    check_network,
    check_readable,
    check_variants,
    check_writable,
)
from llm_ide.swebench.progress import BatchProgress
from llm_ide.swebench.store import (
    PREDS,
    OutputStore,
    read_preds,
    read_statuses,
    unrecorded_spend,
)

log = logging.getLogger("llm_ide.swebench")
__all__ = [
    "BATCH_LOG",
    "BatchAbandoned",
    "BatchOptions",
    "BatchSummary",
    "Outcome",
    "OutputStore",
    "Selection",
    "batch_config",
    "execute_instance",
    "run_batch",
    "run_chosen",
    "run_instance",
    "run_swebench",
]


def run_batch(
    instances: list[Instance],
    options: BatchOptions,
    *,
    progress: BatchProgress | None = None,
    skipped_existing: list[str] | None = None,
    unrecorded: float = 0.0,
) -> BatchSummary:
    """Run `instances` with `options.workers` threads (or as Ray tasks: `options.engine`); Ctrl-C ends the running
    instances as `interrupted`; `unrecorded`: what their earlier runs paid beyond exit_statuses.yaml's record."""
    summary = BatchSummary(options.output, [i.instance_id for i in instances], skipped_existing or [])
    summary.spent_before = OutputStore(options.output).spent() + unrecorded
    if not instances:  # (every one skipped as finished: no progress of none to say)
        return summary
    progress = progress or BatchProgress(total=len(instances), live=False)
    if is_postgres(options.checkpoint):
        prepare_postgres(options.checkpoint)
    if options.engine == "ray":
        from llm_ide.swebench.ray_engine import run_batch_ray  # ray is an optional extra: imported when asked for

        return run_batch_ray(instances, options, progress, summary)
    batch = Batch(options, progress, summary)
    with batch_log(options.output), progress:
        log.info("batch: %d instances, %d workers, model %s", len(instances), options.workers, options.model)
        try:
            batch.run(instances)
        finally:
            record_not_started(batch.store, summary.not_started)
        summary.spent = batch.budget.spent
        if batch.lost:
            say_store_lost(summary, batch.lost)
        elif batch.budget.exhausted and summary.not_started:
            log_not_started(options.cost_limit or 0, batch.budget.spent, len(summary.not_started))
    return summary


class Batch:
    """A batch on this machine: `options.workers` threads, the batch's budget and its stop, each instance's outcome
    recorded where the batch's files are."""

    def __init__(self, options: BatchOptions, progress: BatchProgress, summary: BatchSummary) -> None:
        self.options, self.progress, self.summary = options, progress, summary
        self.settings = batch_config(options)
        self.store = OutputStore(options.output)
        self.budget = CostBudget(options.cost_limit, summary.spent_before, self.store.call_cost())
        self.stop = threading.Event()
        self.commands = Commands()  # Ctrl-C: a run in a silent command stops in it, not after it
        self.lost = ""  # why the batch stopped: its checkpoint store out of reach

    def on_event(self, instance_id: str, event: Any) -> None:
        self.commands.note(event)
        if event.kind == "tool":
            self.progress.tool(instance_id, event.tool)
            return
        self.progress.event(
            instance_id, event.kind, phase=event.phase, step=event.step, action=event.action, cost=event.cost
        )

    def work(self, instance: Instance) -> Outcome:
        if self.stop.is_set() or self.budget.exhausted:
            return Outcome(instance.instance_id, None)
        self.progress.start(instance.instance_id)
        try:
            outcome = run_instance(
                instance,
                self.options,
                self.settings,
                self.store,
                budget=self.budget,
                on_event=self.on_event,
                stop=self.stop,
            )
        except SWEbenchError as error:
            outcome = not_checked_out(instance, error)
            log_outcome(outcome, "0 steps")
            self.store.record_status(instance.instance_id, outcome.exit_status, **outcome.details)
        except Exception as error:  # one instance's crash must not stop the batch; it is retried on the next run
            outcome = self.crashed(instance, error)
        self.progress.finish(instance.instance_id, outcome.exit_status, outcome.cost, outcome.steps, outcome.error)
        if not self.stop.is_set() and (why := store_out_of_reach(self.options, outcome)):
            self.lost = why  # the instances after it would fail one by one: the batch stops, the rerun goes on
            self.stop.set()
        return outcome

    def crashed(self, instance: Instance, error: Exception) -> Outcome:
        """An instance whose run raised: it could not open the batch's lost store (interrupted), or crashed."""
        if why := store_out_of_reach(self.options):
            outcome = not_opened(instance, why)
            log_outcome(outcome, "0 steps")
            record_outcome(self.store, self.options.model, outcome)
            return outcome
        log.exception("%s: crashed", instance.instance_id)
        status, text = crashed(error)
        try:
            self.store.record_status(instance.instance_id, status, error=text)
        except OSError as again:  # a full disk: the status is rebuilt from the trajectories later
            log.error("%s: exit_statuses.yaml not updated: %s", instance.instance_id, again)
        return Outcome(instance.instance_id, status, error=text)

    def collect(self, future: Future[Outcome]) -> None:
        outcome = future.result()
        if outcome.exit_status is None:
            self.summary.not_started.append(outcome.instance_id)
        else:
            self.summary.outcomes[outcome.instance_id] = outcome

    def run(self, instances: list[Instance]) -> None:
        """Every instance through the pool; Ctrl-C: the running ones end at their next event (twice: at once)."""
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.workers))
        ids = {pool.submit(self.work, instance): instance.instance_id for instance in instances}
        futures: set[Future[Outcome]] = set(ids)
        try:
            while futures:
                finished, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    self.collect(future)
        except KeyboardInterrupt:
            self.stop.set()
            self.commands.interrupt()
            log.warning("batch: interrupted; the running instances end at their next event (Ctrl-C again: at once)")
            pool.shutdown(wait=False, cancel_futures=True)
            try:
                for future in futures:
                    if future.cancelled():
                        self.summary.not_started.append(ids[future])
                    else:
                        self.collect(future)
            except KeyboardInterrupt:  # a second Ctrl-C: leave the workers; checkpoints hold every finished step
                log.warning("batch: interrupted again; leaving at once")
                raise BatchAbandoned from None
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, leave_at_once)  # the workers' clean-up goes on until the process exits
            raise
        finally:
            pool.shutdown(wait=not self.stop.is_set())


def leave_at_once(signum: int, frame: object) -> None:
    """A Ctrl-C while the interrupted batch's workers finish: exit now; checkpoints hold every finished step."""
    log.warning("batch: interrupted again; leaving at once")
    logging.shutdown()
    os._exit(130)


@dataclass(frozen=True)
class Selection:
    """The instances a batch runs (`todo`, those of `going_on` among them) and those it skips as finished."""

    dataset: Dataset
    todo: list[Instance]
    skipped: list[str]
    going_on: dict[str, str]  # how each finished one goes on: `limits` (stopped at one the batch's settings no longer
    # reach: from its last step) or `more` (attempts to add: none accepted, a higher attempts.max)
    resumed: list[str]  # those of `todo` that go on from their thread's last checkpoint
    unrecorded: float = 0.0  # what their earlier runs paid that exit_statuses.yaml does not hold (a killed batch)


def prepare(picked: Chosen, options: BatchOptions) -> Selection:
    """The chosen instances but those already in preds.json (unless redo), skipped, and among them those stopped at a
    limit the batch's settings no longer reach, which go on."""
    dataset, chosen = picked.dataset, picked.instances
    existing = set(read_preds(options.output))
    finished = [] if options.redo_existing else [i.instance_id for i in chosen if i.instance_id in existing]
    going_on = beyond_their_limits(options, finished)
    skipped = [instance_id for instance_id in finished if instance_id not in going_on]
    todo = [i.instance_id for i in chosen if i.instance_id not in set(skipped)]
    resumable = [i for i in todo if not (options.redo_existing and i in existing)]
    threads = {} if options.checkpoint == "memory" or not resumable else last_values(options, resumable)
    resumed = with_a_thread(options, resumable, threads)
    unrecorded = unrecorded_spend(options.output, resumable, threads)
    return Selection(dataset, [i for i in chosen if i.instance_id in set(todo)], skipped, going_on, resumed, unrecorded)


def with_a_thread(options: BatchOptions, instance_ids: list[str], threads: dict[str, Any]) -> list[str]:
    """The instances whose thread (with attempts: their attempts' thread) a checkpoint holds: they resume from it."""
    if options.checkpoint == "memory" or not instance_ids:
        return []
    found = set(threads)
    found |= {i for i in instance_ids if (options.output / i / attempts_database(i)).is_file()}
    return [instance_id for instance_id in instance_ids if instance_id in found]


def beyond_their_limits(options: BatchOptions, finished: list[str]) -> dict[str, str]:
    """The finished instances that stopped at a limit (step, cost, tokens, time, the batch's cost limit) the batch's
    settings no longer reach, as their threads' last checkpoints say (with attempts: their attempts' threads), and
    with attempts those that accepted none and have fewer than a higher `attempts.max` gives: each with how it goes
    on (`limits`, `more`)."""
    statuses = read_statuses(options.output)  # (a corrupt file is said now, not after the first instance)
    settings = batch_config(options) if finished else None
    if settings is None or options.checkpoint == "memory":
        return {}
    attempts = settings.attempts.max > 1  # (with attempts, any may have attempts to add: a higher attempts.max)
    stopped = [i for i in finished if attempts or statuses.get(i, {}).get("exit_status") in LIMITS]
    if not stopped:
        return {}
    store = OutputStore(options.output)
    spent = CostBudget(options.cost_limit, store.spent(), store.call_cost()).exhausted  # (what the runs will have)
    values = last_values(options, stopped, attempts)

    def goes_on(instance_id: str) -> str:
        if not attempts:
            return "limits" if past_its_limit(values.get(instance_id, {}), settings.agent, spent) else ""
        folder, thread = options.output / instance_id, values.get(instance_id, {})
        return "" if spent else task_going_on(folder, instance_id, options.checkpoint, thread, settings)

    return {instance_id: how for instance_id in stopped if (how := goes_on(instance_id))}


def last_values(options: BatchOptions, instance_ids: list[str], attempts: bool = False) -> dict[str, dict[str, Any]]:
    """Each instance's thread as its last checkpoint holds it (none: not there), in `--checkpoint` or its folder."""
    if options.checkpoint:
        return thread_values(options.checkpoint, instance_ids)
    found: dict[str, dict[str, Any]] = {}
    for instance_id in instance_ids:
        database = attempts_database(instance_id) if attempts else thread_database(instance_id)
        if (path := options.output / instance_id / database).is_file():
            found |= thread_values(f"sqlite:{path}", [instance_id])
    return found


def forget(options: BatchOptions, instances: list[Instance]) -> None:
    """--redo-existing: drop the finished instances' predictions, run folders and threads (in a --checkpoint store
    outside their folders) so they start afresh."""
    store = OutputStore(options.output)
    existing = store.existing()
    redone = [instance.instance_id for instance in instances if instance.instance_id in existing]
    if redone and options.checkpoint and options.checkpoint != "memory":
        with open_checkpointer(options.checkpoint, Path(os.devnull)) as saver:
            for instance_id in redone:
                saver.delete_thread(instance_id)
    for instance_id in redone:
        shutil.rmtree(options.output / instance_id, ignore_errors=True)
        store.remove_prediction(instance_id)
        store.remove_status(instance_id)  # nor does what it spent count against the batch's limit


def run_swebench(
    subset: str,
    split: str,
    options: BatchOptions,
    *,
    slice_spec: str = "",
    filter_regex: str = "",
    shuffle: bool = False,
    progress_factory: Callable[[int], BatchProgress] | None = None,
    before_run: Callable[[Selection], None] | None = None,
    check: bool = True,
) -> BatchSummary:
    """The Python-level batch entry point: the instances chosen (choice.py), then run."""
    chosen = choose(subset, split, options.output, slice_spec=slice_spec, filter_regex=filter_regex, shuffle=shuffle)
    return run_chosen(chosen, options, progress_factory=progress_factory, before_run=before_run, check=check)


def run_chosen(
    chosen: Chosen,
    options: BatchOptions,
    *,
    progress_factory: Callable[[int], BatchProgress] | None = None,
    before_run: Callable[[Selection], None] | None = None,
    check: bool = True,
) -> BatchSummary:
    """What `llm-ide swebench` runs once it has chosen the instances: the finished ones skipped, the preflight, the
    batch. A batch stopped as its checkpoint store went out of reach raises StoreLost (its `summary`: what it did),
    once its records are written."""
    selection = prepare(chosen, options)
    dataset, todo = selection.dataset, selection.todo
    if before_run is not None:
        before_run(selection)
    if check and todo:
        settings = batch_config(options)
        check_network(settings.environment.network, options.environment)
        if options.engine == "local":  # (a Ray batch's paths are its nodes')
            check_writable(settings.environment.writable, options.environment)
            check_readable(settings.environment.readable, options.environment)
        check_model(options.model, settings, options.base_url)
        check_variants(compose(settings), settings, options.base_url, model=options.model)
    if options.redo_existing and (options.output / PREDS).exists():
        forget(options, todo)
    for instance_id in selection.going_on:  # out of preds.json while it runs: an interrupted one resumes next time
        OutputStore(options.output).remove_prediction(instance_id)
    progress = progress_factory(len(todo)) if progress_factory else None
    with batch_log(options.output):
        for error in dataset.errors:
            log.error("skipping malformed %s", error)
    summary = run_batch(
        todo, options, progress=progress, skipped_existing=selection.skipped, unrecorded=selection.unrecorded
    )
    summary.resumed, summary.row_errors = selection.resumed, [str(error) for error in dataset.errors]
    with batch_log(options.output):
        log.info("batch: %s", summary.said())
    if summary.lost:
        raise StoreLost(summary.lost, summary)
    return summary
