"""Evaluate predictions: each patch applied in its instance's image at /testbed, the instance's tests run and graded."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import re
import shlex
import tarfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.environments.docker.cleanup import KEEPER, cleanup_containers, owner_labels, start_watchdog
from llm_ide.environments.docker.hardening import ROOT, run_attached
from llm_ide.errors import LlmIdeError
from llm_ide.prompting import render_source
from llm_ide.settings import SweBenchSettings
from llm_ide.swebench.dataset import Instance, RowError
from llm_ide.swebench.grading import (
    END_MARKER,
    START_MARKER,
    GradingError,
    grade,
    log_parser,
    read_test_log,
    record_exit_code,
)

EVAL_DIR = "/tmp/llm-ide-eval"
PATCH_FILE = f"{EVAL_DIR}/patch.diff"
# the official harness's chain (swebench 5.0.2 GIT_APPLY_CMDS), each attempt from a pristine tree
APPLY_COMMANDS = (
    ["git", "apply", "--verbose"],
    ["git", "apply", "--verbose", "--3way"],
    ["git", "apply", "--verbose", "--reject"],
    ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i"],
)
RESET_TREE = "git checkout -- . ; git clean -fd"
REVERSE_CHECK = ["git", "apply", "--check", "--reverse"]  # the chain failed: is the patch already in the tree?
MISSING_MODULE = re.compile(r"^\S*python[\d.]*: No module named (\S+)\s*$", re.M)


class EvaluationError(LlmIdeError):
    """This instance cannot be graded (image, container, patch or test run failure): status `error`."""


NOT_GRADED = "interrupted: not graded"


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during an evaluation: the report of the predictions graded before it, and the interrupt."""

    def __init__(self, report: EvalReport, cause: KeyboardInterrupt) -> None:
        super().__init__()
        self.report, self.cause = report, cause


@dataclass
class EvalResult:
    instance_id: str
    status: str  # resolved | unresolved | error | empty_patch
    detail: str = ""
    patch_applied: bool | None = None
    applied_with: str = ""  # the apply command that took the patch
    test_exit_code: int | None = None
    fail_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    pass_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    log: str = ""  # the test output
    log_dir: str = ""  # patch.diff, eval.sh, apply.log, test_output.txt
    seconds: float = 0.0


STATUSES = ("resolved", "unresolved", "error", "empty_patch")


@dataclass
class EvalReport:
    results: list[EvalResult]

    def ids(self, status: str) -> list[str]:
        return sorted(r.instance_id for r in self.results if r.status == status)

    @property
    def resolve_rate(self) -> float:
        return len(self.ids("resolved")) / len(self.results) if self.results else 0.0

    def to_json(self) -> dict[str, Any]:
        counts = {status: len(self.ids(status)) for status in STATUSES}
        return {
            "total": len(self.results),
            **counts,
            "resolve_rate": round(self.resolve_rate, 4),
            **{f"{status}_ids": self.ids(status) for status in STATUSES},
            "instances": {r.instance_id: asdict(r) for r in sorted(self.results, key=lambda r: r.instance_id)},
        }


def changed_files(patch: str) -> tuple[list[str], list[str]]:
    """(files the patch modifies or deletes, files it creates)."""
    modified: list[str] = []
    created: list[str] = []
    for match in re.finditer(r"^diff --git a/(\S+) b/(\S+)\n((?:(?!diff --git).*\n)*?)--- (\S+)", patch, re.M):
        (created if match.group(4) == "/dev/null" else modified).append(match.group(1))
    return modified, created


def eval_script(instance: Instance, settings: SweBenchSettings) -> str:
    """The v5 `eval_script` of the instance, else our pytest script for the files of FAIL_TO_PASS + PASS_TO_PASS
    (files, not ids: the datasets' ids are cut at their first space); either way recording the test command's exit
    code after the end marker."""
    if instance.eval_script:
        return record_exit_code(instance.eval_script)
    modified, created = changed_files(instance.test_patch)
    script = render_source(
        settings.eval_script,
        base_commit=instance.base_commit or "HEAD",
        test_patch=instance.test_patch,
        test_files=modified,
        new_test_files=created,
        tests=list(dict.fromkeys(test.split("::")[0] for test in [*instance.fail_to_pass, *instance.pass_to_pass])),
        start_marker=START_MARKER,
        end_marker=END_MARKER,
    )
    return record_exit_code(script)


def _archive(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_logged(container: Any, command: list[str]) -> tuple[int, str]:
    """Runs `command` in /testbed: its exit status and its output as one stream, read whole (`run_attached`: a log
    without its start marker is no verdict)."""
    argv = ["bash", "-c", f"{shlex.join(command)} 2>&1"]
    return run_attached(container.client.api, container.id, argv, ROOT, "/testbed")


def missing_runner(log: str, exit_code: int | None) -> str | None:
    """Why the test command could not start (not found, or `python -m` without the module), else None."""
    if exit_code == 127:
        lines = [line for line in log.splitlines() if "not found" in line or "No such file" in line]
        return f"the test command was not found (exit 127){': ' + lines[-1].strip() if lines else ''}"
    output = log.split(START_MARKER, 1)[-1].split(END_MARKER, 1)[0]
    match = MISSING_MODULE.search(output)
    if exit_code not in (None, 0) and match:
        return f"the test runner is missing: {match.group(0).strip()}"
    return None


class Evaluator:
    def __init__(self, settings: SweBenchSettings, log_dir: Path, timeout: float | None = None) -> None:
        import docker

        try:
            self.client = docker.from_env()
            self.client.ping()
        except docker.errors.DockerException as error:
            raise EvaluationError(f"the Docker engine is not reachable: {error}") from None
        self.live: dict[str, Any] = {}  # the containers under way: id → the stream that holds its watchdog
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.settings = settings
        self.timeout = float(timeout or settings.eval_timeout)
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)

    def evaluate(self, instance: Instance | RowError | None, instance_id: str, patch: str | None) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(instance_id, "error")
        if instance is None:
            result.detail = "instance is not in the dataset"
        elif isinstance(instance, RowError):
            result.detail = f"instance is malformed in the dataset: {instance}"
        elif patch in ("", None):  # the harness's empty-patch category: not run, neither resolved nor unresolved
            result.status, result.detail = "empty_patch", "empty patch"
        else:
            folder = self.log_dir / instance_id
            folder.mkdir(parents=True, exist_ok=True)
            result.log_dir = str(folder)
            try:
                self._run(instance, patch, result, folder)
            except Exception as error:  # a stop removes the containers under way: their tests end unfinished
                if self.stopped.is_set():
                    result.status, result.detail = "error", NOT_GRADED
                elif isinstance(error, EvaluationError | GradingError):
                    result.status, result.detail = "error", str(error)
                else:
                    raise
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _start(self, instance: Instance) -> Any:
        """The instance's container, labelled as a run's are (`llm-ide cleanup` finds it), with a run's watchdog: when
        this process goes, even by SIGKILL, the container stops and docker removes it."""
        import docker

        run_id = f"eval-{instance.instance_id}"
        with contextlib.suppress(docker.errors.DockerException):  # what a killed evaluation of it left
            cleanup_containers(self.client, run_id=run_id)
        try:
            labels = owner_labels(run_id)
            container = self.client.containers.run(
                instance.image, entrypoint=KEEPER, command=[], detach=True, auto_remove=True, labels=labels
            )
        except docker.errors.ImageNotFound:
            raise EvaluationError(f"image {instance.image} not found (docker pull {instance.image})") from None
        except docker.errors.APIError as error:
            raise EvaluationError(f"cannot start image {instance.image}: {error.explanation or error}") from None
        try:
            with self.lock:
                self.live[container.id] = start_watchdog(self.client.api, container.id)
        except docker.errors.DockerException as error:
            self._remove(container.id)
            raise EvaluationError(f"cannot watch the container of {instance.image}: {error}") from None
        if self.stopped.is_set():
            self._remove(container.id)
            raise EvaluationError(NOT_GRADED)
        return container

    def _remove(self, container_id: str) -> None:
        import docker

        with self.lock:
            watchdog = self.live.pop(container_id, None)
        with contextlib.suppress(docker.errors.DockerException):
            self.client.api.remove_container(container_id, force=True)
        with contextlib.suppress(Exception):
            watchdog.close()

    def stop(self) -> None:
        """Ctrl-C: the containers under way removed at once (their tests end there), and none started after."""
        self.stopped.set()
        with self.lock:
            under_way = list(self.live)
        for container_id in under_way:
            self._remove(container_id)

    def _apply(self, container: Any, result: EvalResult, folder: Path) -> None:
        """The official chain: each command in turn from a pristine tree; a patch already in the tree counts."""
        attempts: list[str] = []
        reason = ""  # git apply's, the first command's: the later ones may not even be in the image
        for number, command in enumerate(APPLY_COMMANDS):
            if number:
                container.exec_run(["bash", "-c", RESET_TREE], workdir="/testbed")
            code, output = run_logged(container, [*command, PATCH_FILE])
            reason = reason or (output.strip().splitlines() or [f"exit {code}"])[-1]
            attempts.append(f"$ {shlex.join(command)} {PATCH_FILE}  # exit {code}\n{output}")
            if code == 0:
                result.applied_with = shlex.join(command)
                break
        else:
            code, check = run_logged(container, [*REVERSE_CHECK, PATCH_FILE])
            attempts.append(f"$ {shlex.join(REVERSE_CHECK)} {PATCH_FILE}  # exit {code}\n{check}")
            if code == 0:
                result.applied_with = "already applied (git apply --check --reverse)"
        (folder / "apply.log").write_text("\n".join(attempts), encoding="utf-8")
        result.patch_applied = bool(result.applied_with)
        if not result.patch_applied:
            raise EvaluationError(f"patch did not apply: {reason} (each attempt in apply.log)")

    def _run(self, instance: Instance, patch: str, result: EvalResult, folder: Path) -> None:
        parser = log_parser(instance.log_parser)
        script = eval_script(instance, self.settings)
        (folder / "patch.diff").write_text(patch, encoding="utf-8")
        (folder / "eval.sh").write_text(script, encoding="utf-8")
        container = self._start(instance)
        try:
            container.exec_run(["mkdir", "-p", EVAL_DIR])
            container.put_archive(EVAL_DIR, _archive({"patch.diff": patch, "eval.sh": script}))
            self._apply(container, result, folder)
            seconds = math.ceil(self.timeout)  # `timeout 0` would be none at all
            command = ["timeout", "-s", "KILL", str(seconds), "bash", f"{EVAL_DIR}/eval.sh"]
            code, log = run_logged(container, command)
            log_path = folder / "test_output.txt"
            log_path.write_text(log, encoding="utf-8")
            result.log = str(log_path)
            if code == 137 and END_MARKER not in log:
                raise EvaluationError(f"the tests timed out after {seconds}s")
            test_log = read_test_log(log, parser)
            result.test_exit_code = test_log.exit_code
            problem = missing_runner(log, test_log.exit_code)
            if problem:
                raise EvaluationError(problem)
            if not test_log.valid and test_log.reason.startswith("no test-output markers"):
                raise EvaluationError("the tests did not run to the end (no test-output markers in the log)")
            result.status, result.fail_to_pass, result.pass_to_pass = grade(instance, test_log.statuses)
            if not test_log.valid:
                result.status, result.detail = "unresolved", test_log.reason
        finally:
            self._remove(container.id)


def evaluate_predictions(
    preds: dict[str, dict[str, Any]],
    instances: dict[str, Instance | RowError],
    *,
    settings: SweBenchSettings,
    log_dir: Path,
    workers: int = 1,
    timeout: float | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
) -> EvalReport:
    evaluator = Evaluator(settings, log_dir, timeout)
    lock = threading.Lock()
    results: list[EvalResult] = []

    def one(instance_id: str) -> None:
        patch = preds[instance_id].get("model_patch")
        result = evaluator.evaluate(instances.get(instance_id), instance_id, patch)
        with lock:
            results.append(result)
            if on_result is not None:
                on_result(result)

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        list(pool.map(one, sorted(preds)))
    except KeyboardInterrupt as interrupt:  # the tests under way end with their containers; none start after
        evaluator.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise EvaluationInterrupted(EvalReport([r for r in results if r.detail != NOT_GRADED]), interrupt) from None
    finally:
        pool.shutdown(wait=True)
    return EvalReport(results)


def load_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """preds.json ({id: pred} or a list) or a .jsonl of predictions → {instance_id: prediction}."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvaluationError(f"predictions file not found: {path}") from None
    try:
        if path.suffix == ".jsonl":
            data: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
    except json.JSONDecodeError as error:
        raise EvaluationError(f"{path}: not valid JSON: {error}") from None
    entries = list(data.items() if isinstance(data, dict) else enumerate(data, 1) if isinstance(data, list) else [])
    if not isinstance(data, dict | list) or not all(isinstance(p, dict) for _, p in entries):
        raise EvaluationError(f"{path}: expected predictions with an instance_id each ({{id: prediction}} or a list)")
    if missing := [key for key, p in entries if "instance_id" not in p]:
        raise EvaluationError(f"{path}: prediction {missing[0]!r} has no instance_id (each names its instance)")
    items = [p for _, p in entries]
    if not items:
        raise EvaluationError(f"{path} holds no predictions: nothing to evaluate (a batch writes one per finished run)")
    return {p["instance_id"]: p for p in items}


def claim_folder(output: Path | None, predictions: Path) -> Path:
    """The folder of one evaluation (created here): `output`, or a new one under `evaluations/` beside the
    predictions. A folder holding another evaluation's report or logs is refused, never overwritten."""
    if output is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        (predictions.parent / "evaluations").mkdir(parents=True, exist_ok=True)
        for suffix in itertools.count(1):
            output = predictions.parent / "evaluations" / f"{predictions.stem}.{stamp}{f'-{suffix}' * (suffix > 1)}"
            with contextlib.suppress(FileExistsError):
                output.mkdir()
                return output
    if (output / "report.json").exists() or (output / "logs").exists():
        raise EvaluationError(f"{output} already holds an evaluation: choose another --output")
    output.mkdir(parents=True, exist_ok=True)
    return output
