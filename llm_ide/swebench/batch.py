"""SWE-bench batch runner: instances → run_task (one container each) → preds.json, exit statuses, trajectories."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.composition import Settings
from llm_ide.errors import ExitStatus
from llm_ide.run.logfile import QuietFileHandler
from llm_ide.run.pg_thread import is_postgres, prepare_postgres
from llm_ide.swebench.dataset import Dataset, Instance, load_dataset, select
from llm_ide.swebench.preflight import check_model, clone_for_local
from llm_ide.swebench.progress import BatchProgress, one_line
from llm_ide.swebench.store import PREDS, OutputStore, read_preds, read_statuses

log = logging.getLogger("llm_ide.swebench")

BATCH_LOG = "swebench.log"


class BatchAbandoned(KeyboardInterrupt):
    """A second Ctrl-C: worker threads are still running; the caller should exit the process (os._exit)."""


@dataclass
class BatchOptions:
    model: str
    output: Path
    workers: int = 1
    environment: str = "docker"
    config_files: list[Path] = field(default_factory=list)
    base_url: str | None = None
    cost_limit: float | None = None
    checkpoint: str | None = None
    redo_existing: bool = False
    config_values: dict[str, Any] = field(default_factory=dict)
    engine: str = "local"  # local: a thread pool; ray: Ray tasks on a cluster (swebench/ray_engine.py)
    ray_address: str | None = None  # None: a one-node cluster started for the batch
    ray_shared_output: bool = False  # the nodes write the run folders into `output` themselves
    task_cpus: float = 1.0
    task_memory_mb: int = 1024
    prefetch_images: bool = False


@dataclass
class Outcome:
    instance_id: str
    exit_status: str
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

    @property
    def cost(self) -> float:
        return sum(outcome.cost for outcome in self.outcomes.values())

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome.exit_status] = counts.get(outcome.exit_status, 0) + 1
        return dict(sorted(counts.items()))


def batch_config(options: BatchOptions) -> Settings:
    from llm_ide.config import deep_merge, load_config

    values = deep_merge(options.config_values, {"environment": {"type": options.environment}})
    return load_config("swebench", list(options.config_files), **values)


EventSink = Callable[[str, Any], None]


def unfinished(outcome: Outcome) -> bool:
    """Interrupted runs, runs that failed on our side (`error`: a full disk, a crash, a patch that could not be
    extracted) and runs whose environment never came up stay out of preds.json: a rerun resumes them."""
    status = outcome.exit_status
    return status in (ExitStatus.INTERRUPTED, ExitStatus.ERROR) or (
        status == ExitStatus.ENVIRONMENT_ERROR and outcome.steps == 0
    )


def run_instance(
    instance: Instance,
    options: BatchOptions,
    settings: Settings,
    store: OutputStore,
    *,
    budget: Any = None,
    on_event: EventSink | None = None,
    stop: threading.Event | None = None,
) -> Outcome:
    """Run one instance with run_task (resuming its checkpoint when it has one) and record its prediction."""
    outcome = execute_instance(
        instance, options, settings, options.output / instance.instance_id, budget=budget, on_event=on_event, stop=stop
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
) -> Outcome:
    """Run one instance in `run_dir` (its thread resumed when it has a checkpoint); nothing shared is written:
    `record_outcome` does that where the batch's files are (the driver, for a Ray batch). `stop` is anything with
    `is_set()`; `intents` replaces the run folder's intent log (e.g. one in Postgres). With `attempts.max` > 1 it is
    run_attempts (the outcome's patch is the chosen one)."""
    from llm_ide.attempts.run import run_attempts
    from llm_ide.run.single import run_task

    runner = run_attempts if settings.attempts.max > 1 else run_task
    extra = {"intents": intents} if runner is run_task else {}

    run_dir.mkdir(parents=True, exist_ok=True)
    repo = clone_for_local(instance, run_dir / "repo") if options.environment == "local" else None

    steps = 0

    def forward(event: Any) -> None:
        nonlocal steps
        steps = max(steps, event.step)
        if on_event is not None:
            on_event(instance.instance_id, event)
        if stop is not None and stop.is_set() and event.kind != "end":
            raise KeyboardInterrupt  # run_task ends the run as `interrupted` (container removed, state saved)

    log.info("%s: starting (image %s)", instance.instance_id, instance.image if repo is None else repo)
    try:
        result = runner(
            instance.problem_statement,
            model=options.model,
            settings=settings,
            output_dir=run_dir,
            run_id=instance.instance_id,
            repo=repo,
            environment=options.environment,
            image=instance.image if options.environment == "docker" else None,
            base_url=options.base_url,
            checkpoint=options.checkpoint,
            task_vars=instance.task_vars(),
            on_event=forward,
            cost_budget=budget,
            **extra,
        )
    except KeyboardInterrupt:
        if stop is None or not stop.is_set():
            raise
        log.warning(
            "%s: interrupted after %d steps; it resumes from its checkpoint on the next run",
            instance.instance_id,
            steps,
        )
        return Outcome(instance.instance_id, ExitStatus.INTERRUPTED, steps=steps)
    stats = result.model_stats or {}
    outcome = Outcome(
        instance.instance_id,
        result.exit_status,
        cost=float(stats.get("cost", 0.0)),
        steps=steps,
        patch=result.submission or "",
        error=getattr(result, "error", ""),
        details={
            "cost": float(stats.get("cost", 0.0)),
            "api_calls": int(stats.get("api_calls", 0)),
            "patch_lines": (result.submission or "").count("\n"),
            "trajectory": str(result.trajectory_path.relative_to(options.output))
            if result.trajectory_path.is_relative_to(options.output)
            else f"{instance.instance_id}/{result.trajectory_path.name}",
        },
    )
    if outcome.error:
        outcome.details["error"] = one_line(outcome.error)
    log_outcome(outcome, f"cost {outcome.cost:.4f}, {outcome.patch.count(chr(10))} patch lines")
    return outcome


def log_outcome(outcome: Outcome, facts: str) -> None:
    """swebench.log: how an instance ended, and why when it failed (a warning)."""
    reason = f": {one_line(outcome.error)}" if outcome.error else ""
    level = logging.WARNING if outcome.error else logging.INFO
    log.log(level, "%s: %s (%s)%s", outcome.instance_id, outcome.exit_status, facts, reason)


def record_outcome(store: OutputStore, model: str, outcome: Outcome) -> None:
    """preds.json (finished runs only) and exit_statuses.yaml for one instance's outcome."""
    if outcome.exit_status == ExitStatus.INTERRUPTED and not outcome.details:
        store.record_status(outcome.instance_id, ExitStatus.INTERRUPTED, steps=outcome.steps)
        return
    if not unfinished(outcome):
        store.add_prediction(outcome.instance_id, model, outcome.patch)
    store.record_status(outcome.instance_id, outcome.exit_status, **outcome.details)


@contextmanager
def batch_log(output: Path) -> Iterator[None]:
    output.mkdir(parents=True, exist_ok=True)
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


def run_batch(
    instances: list[Instance],
    options: BatchOptions,
    *,
    progress: BatchProgress | None = None,
    skipped_existing: list[str] | None = None,
) -> BatchSummary:
    """Run `instances` with `options.workers` threads (or as Ray tasks: `options.engine`); Ctrl-C ends the running
    instances as `interrupted`."""
    from llm_ide.run.single import CostBudget

    summary = BatchSummary(options.output, [i.instance_id for i in instances], skipped_existing or [])
    progress = progress or BatchProgress(total=len(instances), live=False)
    if instances and is_postgres(options.checkpoint):
        prepare_postgres(options.checkpoint)
    if options.engine == "ray":
        from llm_ide.swebench.ray_engine import run_batch_ray

        return run_batch_ray(instances, options, progress, summary)
    settings = batch_config(options)
    store = OutputStore(options.output)
    budget = CostBudget(options.cost_limit)
    stop = threading.Event()

    def on_event(instance_id: str, event: Any) -> None:
        if event.kind == "tool":
            progress.tool(instance_id, event.tool)
            return
        progress.event(
            instance_id,
            event.kind,
            phase=event.phase,
            step=event.step,
            action=event.action,
            cost=event.cost,
        )

    def work(instance: Instance) -> Outcome:
        if stop.is_set() or budget.exhausted:
            return Outcome(instance.instance_id, "not_started")
        progress.start(instance.instance_id)
        try:
            outcome = run_instance(instance, options, settings, store, budget=budget, on_event=on_event, stop=stop)
        except Exception as error:  # one instance's crash must not stop the batch; it is retried on the next run
            log.exception("%s: crashed", instance.instance_id)
            try:
                store.record_status(instance.instance_id, ExitStatus.ERROR, error=f"{type(error).__name__}: {error}")
            except OSError as again:  # a full disk: the status is rebuilt from the trajectories later
                log.error("%s: exit_statuses.yaml not updated: %s", instance.instance_id, again)
            outcome = Outcome(instance.instance_id, ExitStatus.ERROR, error=f"{type(error).__name__}: {error}")
        progress.finish(instance.instance_id, outcome.exit_status, outcome.cost, outcome.steps, outcome.error)
        return outcome

    def collect(future: Future[Outcome]) -> None:
        outcome = future.result()
        if outcome.exit_status == "not_started":
            summary.not_started.append(outcome.instance_id)
        else:
            summary.outcomes[outcome.instance_id] = outcome

    pool = ThreadPoolExecutor(max_workers=max(1, options.workers))
    with batch_log(options.output), progress:
        log.info("batch: %d instances, %d workers, model %s", len(instances), options.workers, options.model)
        futures: set[Future[Outcome]] = {pool.submit(work, instance) for instance in instances}
        try:
            while futures:
                finished, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    collect(future)
        except KeyboardInterrupt:
            stop.set()
            log.warning("batch: interrupted; the running instances end at their next event (Ctrl-C again: at once)")
            pool.shutdown(wait=False, cancel_futures=True)
            try:
                for future in futures:
                    if not future.cancelled():
                        collect(future)
            except KeyboardInterrupt:  # a second Ctrl-C: leave the workers; checkpoints hold every finished step
                log.warning("batch: interrupted again; leaving at once")
                raise BatchAbandoned from None
            raise
        finally:
            pool.shutdown(wait=not stop.is_set())
    if budget.exhausted and summary.not_started:
        log.warning(
            "batch: global cost limit %.2f reached; %d instances not started",
            options.cost_limit or 0,
            len(summary.not_started),
        )
    return summary


def prepare(
    subset: str,
    split: str,
    *,
    slice_spec: str = "",
    filter_regex: str = "",
    shuffle: bool = False,
    output: Path,
    redo_existing: bool = False,
) -> tuple[Dataset, list[Instance], list[str]]:
    """Load and select: shuffle → filter → slice → skip instances already in preds.json (unless redo).
    Returns (dataset, instances to run, ids skipped as already done)."""
    dataset = load_dataset(subset, split)
    chosen = select(dataset.instances, shuffle=shuffle, filter_regex=filter_regex, slice_spec=slice_spec)
    existing = set(read_preds(output))
    read_statuses(output)  # a corrupt file is said now, not after the first instance
    skipped = [] if redo_existing else [i.instance_id for i in chosen if i.instance_id in existing]
    return dataset, [i for i in chosen if i.instance_id not in set(skipped)], skipped


def forget(output: Path, instances: list[Instance]) -> None:
    """--redo-existing: drop the finished instances' predictions and run folders so they start afresh."""
    store = OutputStore(output)
    existing = store.existing()
    for instance in instances:
        if instance.instance_id in existing:
            shutil.rmtree(output / instance.instance_id, ignore_errors=True)
            store.remove_prediction(instance.instance_id)


def run_swebench(
    subset: str,
    split: str,
    options: BatchOptions,
    *,
    slice_spec: str = "",
    filter_regex: str = "",
    shuffle: bool = False,
    progress_factory: Callable[[int], BatchProgress] | None = None,
    before_run: Callable[[Dataset, list[Instance], list[str]], None] | None = None,
    check: bool = True,
) -> BatchSummary:
    """The Python-level batch entry point (what `llm-ide swebench` runs)."""
    dataset, todo, skipped = prepare(
        subset,
        split,
        slice_spec=slice_spec,
        filter_regex=filter_regex,
        shuffle=shuffle,
        output=options.output,
        redo_existing=options.redo_existing,
    )
    if before_run is not None:
        before_run(dataset, todo, skipped)
    if check and todo:
        check_model(options.model, batch_config(options), options.base_url)
    if options.redo_existing and (options.output / PREDS).exists():
        forget(options.output, todo)
    progress = progress_factory(len(todo)) if progress_factory else None
    with batch_log(options.output):
        for error in dataset.errors:
            log.error("skipping malformed %s", error)
    summary = run_batch(todo, options, progress=progress, skipped_existing=skipped)
    summary.row_errors = [str(error) for error in dataset.errors]
    return summary
