"""The options of the SWE-bench commands (`swebench`, `swebench-single`, `evaluate`): the ones they share (`run`
shares `--base-url`), then each command's own; and the model they name."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated

import typer

from llm_ide.cli.console import config_default, fail
from llm_ide.cli.run_options import COST_LIMIT, STEP_LIMIT, RunModel, environment_option, store

Subset = Annotated[
    str,
    typer.Option(help="lite | verified | full | a Hugging Face dataset name | a local .json/.jsonl/.parquet file."),
]
Split = Annotated[str, typer.Option(help="Dataset split (dev, test); ignored for local files.")]
Model = RunModel
BaseUrl = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint.", show_default="$OPENAI_BASE_URL, else the provider's own"),
]
ConfigFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML file(s) overriding keys of the swebench config.",
        show_default="none: llm_ide/prompts/swebench.yaml",
    ),
]
EnvironmentKind = Annotated[str, environment_option(True, "--environment-class")]
Checkpoint = Annotated[
    str | None,
    typer.Option(
        callback=store, help="sqlite:PATH | postgres://… | memory.", show_default="SQLite in each instance's folder"
    ),
]
Engine = Annotated[
    str, typer.Option(help="local (a thread pool of --workers) or ray (Ray tasks on the cluster at --address).")
]
Address = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="--engine ray: the cluster (HOST:PORT of `ray start --head`, or auto).",
        show_default="a one-node cluster started for the batch",
    ),
]
StepLimit = Annotated[
    int | None,
    typer.Option(
        help=STEP_LIMIT.format(" per instance"),
        show_default=config_default("agent.step_limit", "swebench"),
    ),
]
Repos = Annotated[
    Path | None,
    typer.Option(
        help="--environment local: a folder of <owner>__<name>.bundle files or clones to check the instances out "
        "from (offline).",
        show_default="the row's repo: a clone or bundle path, a URL, or owner/name on GitHub",
    ),
]

# `swebench`
Slice = Annotated[
    str,
    typer.Option(
        "--slice",
        help="Python slice of the dataset's rows (malformed ones counted, then skipped; after --shuffle, of its "
        "instances), after --shuffle and --filter, e.g. 0:10.",
        show_default="all",
    ),
]
Filter = Annotated[
    str,
    typer.Option(
        "--filter", help="Regex searched anywhere in the instance ids (a substring works).", show_default="all"
    ),
]
Shuffle = Annotated[bool, typer.Option(help="Shuffle (seeded) before filtering and slicing.")]
BatchOutput = Annotated[Path, typer.Option("--output", "-o", help="Batch output directory.")]
BatchWorkers = Annotated[int, typer.Option("--workers", "-w", min=1, help="Instances run in parallel.")]
RedoExisting = Annotated[bool, typer.Option(help="Run again instances already in preds.json.")]


def dollars(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"Input should be a finite number (got {value})")
    return value


def check_engine(engine: str, ray_options: dict[str, object]) -> None:
    """The engine named right, no option of Ray's given to the local one (it would be ignored), and a Ray `--address`
    a head that takes our token."""
    if engine not in ("local", "ray"):
        raise fail(f"unknown engine {engine!r}: use local or ray")
    if engine == "local" and (given := [name for name, value in ray_options.items() if value]):
        raise fail(f"{given[0]} is for --engine ray (the local engine runs the instances on this machine)")
    if engine == "ray" and (address := ray_options.get("--address")):  # before any folder is made
        from llm_ide.swebench.preflight import SWEbenchError
        from llm_ide.swebench.ray_connect import check_address

        try:
            check_address(str(address))
        except SWEbenchError as error:
            raise fail(str(error)) from None


def seconds(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"Input should be a finite number greater than 0 (got {value})")
    return value


BatchCostLimit = Annotated[
    float | None,
    typer.Option(
        min=0,
        callback=dollars,
        help=COST_LIMIT.format(" of the whole batch, what its earlier runs in --output spent included"),
        show_default="none",
    ),
]
TaskCpus = Annotated[float, typer.Option(min=0, help="--engine ray: CPUs each instance's task asks for.")]
TaskMemory = Annotated[int, typer.Option(min=0, help="--engine ray: memory (MB) each instance's task asks for.")]
SharedOutput = Annotated[
    bool, typer.Option(help="--engine ray: the nodes see --output (shared filesystem) and write the run folders there.")
]
PrefetchImages = Annotated[
    bool, typer.Option(help="--engine ray: every docker node pulls the instances' images before the run.")
]

# `swebench-single`
Instance = Annotated[
    str,
    typer.Option(
        "--instance", "-i", help="Instance id, or its row's number in the dataset (from 0, malformed rows counted)."
    ),
]
SingleOutput = Annotated[Path, typer.Option("--output", "-o", help="Output directory.")]
RunCostLimit = Annotated[
    float | None,
    typer.Option(help=COST_LIMIT.format(""), show_default=config_default("agent.cost_limit", "swebench")),
]

# `evaluate`
Predictions = Annotated[Path, typer.Argument(help="preds.json ({id: prediction}) or a .jsonl of predictions.")]
EvaluationWorkers = Annotated[int, typer.Option("--workers", "-w", min=1, help="Instances evaluated in parallel.")]
EvaluationOutput = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Folder of this evaluation: report.json and logs/<instance id>/ (never one holding another).",
        show_default="evaluations/<predictions name>.<UTC time> beside the predictions",
    ),
]
EvaluationTimeout = Annotated[
    float | None,
    typer.Option(
        callback=seconds,
        help="Seconds per instance's test run.",
        show_default=config_default("swebench.eval_timeout", "swebench"),
    ),
]
Attempts = Annotated[
    bool, typer.Option(help="Also grade every attempt's patch: pass@k beside the chosen patch's resolve rate.")
]


def model_name(model: str | None) -> str:
    """`--model`, else $LLM_IDE_MODEL: a command that runs the agent needs one."""
    model = model or os.environ.get("LLM_IDE_MODEL")
    if not model:
        raise fail("no model: pass --model (e.g. openai:gpt-5-mini, scripted:script.yaml) or set LLM_IDE_MODEL")
    return model
