"""Evaluate predictions: each patch applied in its instance's image at /testbed, the instance's tests run and graded."""

from __future__ import annotations

import contextlib
import io
import json
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

from jinja2 import Environment, StrictUndefined

from llm_ide.errors import LlmIdeError
from llm_ide.settings import SweBenchSettings
from llm_ide.swebench.dataset import Instance

START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
EVAL_DIR = "/tmp/llm-ide-eval"
PASSING = frozenset({"PASSED", "XFAIL"})
PYTEST_STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL")
PYTEST_PARSERS = frozenset({"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2"})

_JINJA = Environment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_JINJA.filters["shquote"] = shlex.quote


class EvaluationError(LlmIdeError):
    """This instance cannot be graded (image, container, patch or test run failure): status `error`."""


@dataclass
class EvalResult:
    instance_id: str
    status: str  # resolved | unresolved | error
    detail: str = ""
    patch_applied: bool | None = None
    fail_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    pass_to_pass: dict[str, list[str]] = field(default_factory=lambda: {"success": [], "failure": []})
    log: str = ""
    seconds: float = 0.0


@dataclass
class EvalReport:
    results: list[EvalResult]

    def ids(self, status: str) -> list[str]:
        return sorted(r.instance_id for r in self.results if r.status == status)

    @property
    def resolve_rate(self) -> float:
        return len(self.ids("resolved")) / len(self.results) if self.results else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "total": len(self.results),
            "resolved": len(self.ids("resolved")),
            "unresolved": len(self.ids("unresolved")),
            "error": len(self.ids("error")),
            "resolve_rate": round(self.resolve_rate, 4),
            "resolved_ids": self.ids("resolved"),
            "unresolved_ids": self.ids("unresolved"),
            "error_ids": self.ids("error"),
            "instances": {r.instance_id: asdict(r) for r in sorted(self.results, key=lambda r: r.instance_id)},
        }


def parse_pytest_log(log: str) -> dict[str, str]:
    """`pytest -rA` summary lines (`PASSED node`, `FAILED node - message`) → {node id: status}."""
    statuses: dict[str, str] = {}
    for line in log.split("\n"):
        status, _, rest = line.rstrip().partition(" ")
        if status not in PYTEST_STATUSES or not rest or re.match(r"\[\d+\] ", rest):  # `SKIPPED [2] file:1: why`
            continue
        node = rest.split(" - ", 1)[0] if status in ("FAILED", "ERROR") else rest
        statuses[node.strip()] = status
    return statuses


def log_parser(name: str | None) -> Callable[[str], dict[str, str]]:
    """The instance's `log_parser` from the swebench package when it is installed; our pytest parser otherwise."""
    if not name:
        return parse_pytest_log
    try:
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError:
        if name in PYTEST_PARSERS:
            return parse_pytest_log
        raise EvaluationError(
            f"log parser {name} needs the swebench package (pip install swebench), or use the official harness"
        ) from None
    if name not in PARSER_REGISTRY:
        raise EvaluationError(f"unknown log parser {name} (not in swebench's PARSER_REGISTRY)")
    parser = PARSER_REGISTRY[name]
    return lambda log: parser(log, None)


def extract_test_output(log: str) -> str:
    if START_MARKER not in log or END_MARKER not in log.split(START_MARKER, 1)[1]:
        raise EvaluationError("the tests did not run to the end (no test-output markers in the log)")
    return log.split(START_MARKER, 1)[1].split(END_MARKER, 1)[0]


def grade(instance: Instance, statuses: dict[str, str]) -> tuple[str, dict[str, list[str]], dict[str, list[str]]]:
    """SWE-bench's rule: resolved iff every FAIL_TO_PASS test passes and no PASS_TO_PASS test fails (skips allowed)."""
    f2p = {"success": [], "failure": []}
    p2p = {"success": [], "failure": []}
    for test in instance.fail_to_pass:
        f2p["success" if statuses.get(test) in PASSING else "failure"].append(test)
    for test in instance.pass_to_pass:
        p2p["success" if statuses.get(test) in PASSING | {"SKIPPED"} else "failure"].append(test)
    resolved = not f2p["failure"] and not p2p["failure"]
    return ("resolved" if resolved else "unresolved"), f2p, p2p


def changed_files(patch: str) -> tuple[list[str], list[str]]:
    """(files the patch modifies or deletes, files it creates)."""
    modified: list[str] = []
    created: list[str] = []
    for match in re.finditer(r"^diff --git a/(\S+) b/(\S+)\n((?:(?!diff --git).*\n)*?)--- (\S+)", patch, re.M):
        (created if match.group(4) == "/dev/null" else modified).append(match.group(1))
    return modified, created


def eval_script(instance: Instance, settings: SweBenchSettings) -> str:
    """The v5 `eval_script` of the instance, else our pytest script for FAIL_TO_PASS + PASS_TO_PASS."""
    if instance.eval_script:
        return instance.eval_script
    modified, created = changed_files(instance.test_patch)
    return _JINJA.from_string(settings.eval_script).render(
        base_commit=instance.base_commit or "HEAD",
        test_patch=instance.test_patch,
        test_files=modified,
        new_test_files=created,
        tests=[*instance.fail_to_pass, *instance.pass_to_pass],
        start_marker=START_MARKER,
        end_marker=END_MARKER,
    )


def _archive(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Evaluator:
    def __init__(self, settings: SweBenchSettings, log_dir: Path, timeout: float | None = None) -> None:
        import docker

        from llm_ide.environments.docker import LABEL, RUN_ID_LABEL

        try:
            self.client = docker.from_env()
            self.client.ping()
        except docker.errors.DockerException as error:
            raise EvaluationError(f"the Docker engine is not reachable: {error}") from None
        self.labels = (LABEL, RUN_ID_LABEL)
        self.settings = settings
        self.timeout = float(timeout or settings.eval_timeout)
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)

    def evaluate(self, instance: Instance | None, instance_id: str, patch: str) -> EvalResult:
        started = time.monotonic()
        result = EvalResult(instance_id, "error")
        if instance is None:
            result.detail = "instance is not in the dataset"
        elif not patch.strip():
            result.status, result.detail = "unresolved", "empty patch"
        else:
            log_path = self.log_dir / f"{instance_id}.log"
            result.log = str(log_path)
            try:
                self._run(instance, patch, result, log_path)
            except EvaluationError as error:
                result.status, result.detail = "error", str(error)
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _run(self, instance: Instance, patch: str, result: EvalResult, log_path: Path) -> None:
        import docker

        label, run_label = self.labels
        try:
            container = self.client.containers.run(
                instance.image,
                ["sleep", "infinity"],
                detach=True,
                labels={label: "1", run_label: f"eval-{instance.instance_id}"},
            )
        except docker.errors.ImageNotFound:
            raise EvaluationError(f"image {instance.image} not found (docker pull {instance.image})") from None
        except docker.errors.APIError as error:
            raise EvaluationError(f"cannot start image {instance.image}: {error.explanation or error}") from None
        try:
            files = {"model.patch": patch, "eval.sh": eval_script(instance, self.settings)}
            container.exec_run(["mkdir", "-p", EVAL_DIR])
            container.put_archive(EVAL_DIR, _archive(files))
            apply = _JINJA.from_string(self.settings.apply_patch).render(patch_file=f"{EVAL_DIR}/model.patch")
            code, output = container.exec_run(["bash", "-c", apply], workdir="/testbed")
            apply_log = output.decode("utf-8", errors="replace")
            result.patch_applied = code == 0
            if code != 0:
                log_path.write_text(apply_log, encoding="utf-8")
                raise EvaluationError(f"patch did not apply: {apply_log.strip().splitlines()[-1:]}")
            command = ["timeout", "-s", "KILL", str(int(self.timeout)), "bash", f"{EVAL_DIR}/eval.sh"]
            code, output = container.exec_run(command, workdir="/testbed")
            log = output.decode("utf-8", errors="replace")
            log_path.write_text(apply_log + "\n" + log, encoding="utf-8")
            if code == 137 and END_MARKER not in log:
                raise EvaluationError(f"the tests timed out after {int(self.timeout)}s")
            statuses = log_parser(instance.log_parser)(extract_test_output(log))
            result.status, result.fail_to_pass, result.pass_to_pass = grade(instance, statuses)
        finally:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)


def evaluate_predictions(
    preds: dict[str, dict[str, Any]],
    instances: dict[str, Instance],
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
        patch = preds[instance_id].get("model_patch") or ""
        result = evaluator.evaluate(instances.get(instance_id), instance_id, patch)
        with lock:
            results.append(result)
            if on_result is not None:
                on_result(result)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, sorted(preds)))
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
    items = list(data.values()) if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(p, dict) and "instance_id" in p for p in items):
        raise EvaluationError(f"{path}: expected predictions with an instance_id each ({{id: prediction}} or a list)")
    return {p["instance_id"]: p for p in items}
