#!/usr/bin/env python3
"""Drive a SWE-bench batch from Python (what `llm-ide swebench` does, as a script you can adapt).

    python scripts/run_swebench.py --subset verified --split test --model openai:gpt-5-mini --workers 4 \\
        --slice 0:20 --output runs/verified --evaluate

Re-running the same command resumes: instances already in preds.json are skipped, an interrupted instance
continues from its checkpoint. With `--evaluate` the predictions are then graded in their images.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.dataset import DatasetError, load_dataset
from llm_ide.swebench.evaluate import claim_folder, evaluate_predictions, load_predictions
from llm_ide.swebench.preflight import SWEbenchError
from llm_ide.swebench.progress import BatchProgress


def main(
    model: Annotated[str, typer.Option(help="provider:name, scripted:PATH or an OpenAI-compatible model name.")],
    subset: Annotated[str, typer.Option(help="lite | verified | full | a local .json/.jsonl/.parquet")] = "lite",
    split: str = "dev",
    output: Path = Path("swebench_output"),
    workers: int = 1,
    slice_spec: Annotated[str, typer.Option("--slice")] = "",
    filter_regex: Annotated[str, typer.Option("--filter")] = "",
    environment: str = "docker",
    config: Annotated[list[Path] | None, typer.Option()] = None,
    base_url: str | None = None,
    cost_limit: Annotated[float | None, typer.Option(help="Global cost limit for the batch (USD).")] = None,
    evaluate: Annotated[bool, typer.Option(help="Grade preds.json in the instances' images afterwards.")] = False,
) -> None:
    console = Console()
    options = BatchOptions(
        model=model,
        output=output,
        workers=workers,
        environment=environment,
        config_files=config or [],
        base_url=base_url,
        cost_limit=cost_limit,
    )
    try:
        summary = run_swebench(
            subset,
            split,
            options,
            slice_spec=slice_spec,
            filter_regex=filter_regex,
            progress_factory=lambda total: BatchProgress(total=total, console=console),
        )
    except (DatasetError, SWEbenchError, ValueError) as error:  # user errors: one line, no traceback
        console.print(f"error: {error}", markup=False)
        raise typer.Exit(2) from None
    table = Table("instance", "exit status", "steps", "cost", "patch lines")
    for outcome in sorted(summary.outcomes.values(), key=lambda o: o.instance_id):
        table.add_row(
            outcome.instance_id,
            outcome.exit_status,
            str(outcome.steps),
            f"${outcome.cost:.4f}",
            str(outcome.patch.count("\n")),
        )
    console.print(table)
    console.print(
        f"{len(summary.outcomes)} run, {len(summary.skipped_existing)} already done, "
        f"{len(summary.not_started)} not started (cost limit), {len(summary.row_errors)} malformed rows; "
        f"total ${summary.cost:.4f}"
    )
    if evaluate:
        instances = {i.instance_id: i for i in load_dataset(subset, split).instances}
        folder = claim_folder(None, output / "preds.json")
        report = evaluate_predictions(
            load_predictions(output / "preds.json"),
            instances,
            settings=load_config("swebench", config or []).swebench,
            log_dir=folder / "logs",
            workers=workers,
            on_result=lambda r: console.print(f"  {r.instance_id}: {r.status} {r.detail}".rstrip(), markup=False),
        )
        (folder / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
        console.print(f"resolved {len(report.ids('resolved'))}/{len(report.results)} ({report.resolve_rate:.1%})")
        console.print(f"evaluation: {folder}")


if __name__ == "__main__":
    typer.run(main)
