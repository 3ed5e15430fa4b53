"""`llm-ide evaluate`: each prediction graded in its instance's image; the per-instance table, the resolve rate,
and with --attempts every attempt graded (pass@k)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from llm_ide.cli.console import console, err_console, fail, interrupted_exit, print_whole
from llm_ide.cli.options import (
    Address,
    Attempts,
    ConfigFiles,
    Engine,
    EvaluationOutput,
    EvaluationTimeout,
    EvaluationWorkers,
    Predictions,
    Split,
    Subset,
    check_engine,
)
from llm_ide.errors import install_signal_policy
from llm_ide.terminal import plural, terminal_safe


def report_table(report: Any) -> Table:
    table = Table("instance", "status", "FAIL_TO_PASS", "PASS_TO_PASS", "seconds", "detail")
    colours = {"resolved": "green", "unresolved": "yellow", "error": "red", "empty_patch": "dim"}
    for result in sorted(report.results, key=lambda r: r.instance_id):
        f2p, p2p = result.fail_to_pass, result.pass_to_pass
        table.add_row(
            result.instance_id,
            f"[{colours[result.status]}]{result.status}[/]",
            f"{len(f2p['success'])}/{len(f2p['success']) + len(f2p['failure'])}",
            f"{len(p2p['success'])}/{len(p2p['success']) + len(p2p['failure'])}",
            f"{result.seconds:.1f}",
            result.detail,
        )
    return table


def show_result(result: Any) -> None:
    console.print(terminal_safe(f"  {result.instance_id}: {result.status} {result.detail}".rstrip()), markup=False)


def grade_attempts(
    report: Any,
    preds: dict[str, Any],
    instances: dict[str, Any],
    run_folder: Path,
    settings: Any,
    folder: Path,
    workers: int,
    timeout: float | None,
) -> dict[str, Any]:
    """`evaluate --attempts`: every attempt graded; a table of each instance's attempts beside its chosen patch."""
    from llm_ide.swebench.attempts import evaluate_attempts
    from llm_ide.swebench.evaluate import Evaluator

    evaluator = Evaluator(settings, folder / "logs", timeout)
    outcome = evaluate_attempts(report, preds, instances, run_folder, evaluator, workers=workers, on_result=show_result)
    graded = outcome.to_json()
    table = Table("instance", "chosen", "attempts", "execution picked", title=f"attempts (pass@{graded['k']})")
    for instance_id, row in graded["instances"].items():
        statuses = ", ".join(f"{index}: {status}" for index, status in row["attempts"].items()) or "(no attempts)"
        table.add_row(instance_id, row["chosen"], statuses, ", ".join(map(str, row["execution"])) or "—")
    print_whole(table)
    if graded["execution_narrowed"]:
        console.print(
            f"execution signal: narrowed the choice on {graded['execution_narrowed']} instances, picked only "
            f"resolved patches on {graded['execution_resolved']}"
        )
    return graded


def evaluate_command(
    predictions: Predictions,
    subset: Subset = "lite",
    split: Split = "dev",
    workers: EvaluationWorkers = 1,
    output: EvaluationOutput = None,
    timeout: EvaluationTimeout = None,
    config: ConfigFiles = None,
    attempts: Attempts = False,
    engine: Engine = "local",
    address: Address = None,
) -> None:
    """Apply each predicted patch in its instance's image, run the instance's tests, report the resolve rate."""
    check_engine(engine, {"--address": address})
    install_signal_policy()  # SIGTERM/SIGHUP stop an evaluation like Ctrl-C: its partial report kept
    settings, preds, dataset, folder = evaluation_inputs(predictions, subset, split, config, output)
    for error in dataset.errors:
        err_console.print(f"[yellow]malformed {error}[/]", soft_wrap=True)
    instances = dataset.by_id()  # a malformed row's id: the row, said to be malformed, and why
    where = f"Ray tasks on {address or 'a local one-node cluster'}" if engine == "ray" else plural(workers, "worker")
    console.print(f"evaluating {plural(len(preds), 'prediction')} with {where} into {folder}", markup=False)
    report = grade(preds, instances, settings, folder, workers=workers, timeout=timeout, engine=engine, address=address)
    print_whole(report_table(report))
    data = report.to_json()
    if attempts:
        data["attempts"] = grade_attempts(
            report, preds, instances, predictions.parent, settings, folder, workers, timeout
        )
    (folder / "report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print_totals(data, folder)


def evaluation_inputs(
    predictions: Path, subset: str, split: str, config: list[Path] | None, output: Path | None
) -> tuple[Any, dict[str, Any], Any, Path]:
    """The swebench settings, the predictions, the dataset and the evaluation's folder (claimed: made, and never
    one that holds another evaluation)."""
    from llm_ide.config import ConfigError, load_config, with_user_config
    from llm_ide.swebench.dataset import DatasetError, load_dataset
    from llm_ide.swebench.evaluate import EvaluationError, claim_folder, load_predictions

    try:
        settings = load_config("swebench", with_user_config(config)).swebench
        preds = load_predictions(predictions)
        dataset = load_dataset(subset, split)
        return settings, preds, dataset, claim_folder(output, predictions)
    except (ConfigError, DatasetError, EvaluationError) as error:
        raise fail(str(error)) from None


def grade(
    preds: dict[str, Any],
    instances: dict[str, Any],
    settings: Any,
    folder: Path,
    *,
    workers: int,
    timeout: float | None,
    engine: str,
    address: str | None,
) -> Any:
    """Each prediction graded, by a pool of `workers` threads here or by Ray tasks on the cluster at `address`."""
    from llm_ide.swebench.evaluate import EvaluationError, EvaluationInterrupted, evaluate_predictions

    grading = {"settings": settings, "log_dir": folder / "logs", "workers": workers, "timeout": timeout}
    try:
        if engine == "ray":
            from llm_ide.swebench.ray_evaluate import evaluate_on_ray

            return evaluate_on_ray(preds, instances, **grading, address=address, on_result=show_result)
        return evaluate_predictions(preds, instances, **grading, on_result=show_result)
    except EvaluationError as error:
        raise fail(str(error)) from None
    except EvaluationInterrupted as interrupt:  # what was graded is kept, said to be partial
        graded = interrupt.report
        data = {**graded.to_json(), "interrupted": True}
        data["not_graded"] = sorted(set(preds) - set(data["instances"]))
        (folder / "report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print_whole(report_table(graded))
        err_console.print(
            f"[bold yellow]interrupted[/]: {data['total']} of {len(preds)} predictions graded, "
            f"{len(data['not_graded'])} not; partial report: {folder / 'report.json'}",
            soft_wrap=True,
        )
        raise interrupted_exit(interrupt.cause) from None


def print_totals(data: dict[str, Any], folder: Path) -> None:
    """The resolve rate (and pass@k); an evaluation that graded no patch exits 1."""
    console.print(
        f"[bold]resolved {data['resolved']}/{data['total']} ({data['resolve_rate']:.1%})[/], "
        f"unresolved {data['unresolved']}, error {data['error']}, empty patch {data['empty_patch']} — report: "
        f"{folder / 'report.json'}"
    )
    if graded := data.get("attempts"):
        console.print(
            f"[bold]pass@{graded['k']} {graded['pass_at_k_count']}/{data['total']} ({graded['pass_at_k']:.1%})[/] "
            f"(any attempt resolved); chosen patch resolved {graded['chosen_resolved_count']}/{data['total']} "
            f"({graded['chosen_resolve_rate']:.1%})"
        )
    if not data["resolved"] + data["unresolved"]:  # no patch was graded: an evaluation that did not happen
        err_console.print(
            f"[bold red]nothing could be evaluated[/]: {plural(data['error'], 'error')}, {data['empty_patch']} empty "
            f"patch{'es' * (data['empty_patch'] != 1)} of {plural(data['total'], 'prediction')} (the reasons above and "
            f"in {folder / 'logs'})"
        )
        raise typer.Exit(1)
