"""What `llm-ide evaluate` prints: the per-instance table, and with --attempts every attempt graded (pass@k)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from llm_ide.cli.console import console


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


def grade_attempts(report, preds, instances, run_folder, settings, folder, workers, timeout, show) -> dict[str, Any]:
    """`evaluate --attempts`: every attempt graded; a table of each instance's attempts beside its chosen patch."""
    from llm_ide.swebench.attempts import evaluate_attempts
    from llm_ide.swebench.evaluate import Evaluator

    graded = evaluate_attempts(report, preds, instances, run_folder, Evaluator(settings, folder / "logs", timeout),
                               workers=workers, on_result=show).to_json()  # fmt: skip
    table = Table("instance", "chosen", "attempts", "execution picked", title=f"attempts (pass@{graded['k']})")
    for instance_id, row in graded["instances"].items():
        statuses = ", ".join(f"{index}: {status}" for index, status in row["attempts"].items()) or "(no attempts)"
        table.add_row(instance_id, row["chosen"], statuses, ", ".join(map(str, row["execution"])) or "—")
    console.print(table)
    if graded["execution_narrowed"]:
        console.print(f"execution signal: narrowed the choice on {graded['execution_narrowed']} instances, picked only "
                      f"resolved patches on {graded['execution_resolved']}")  # fmt: skip
    return graded
