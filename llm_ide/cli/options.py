"""Options the SWE-bench commands share (`swebench`, `swebench-single`, `evaluate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_ide.cli.console import config_default

Subset = Annotated[
    str,
    typer.Option(help="lite | verified | full | a Hugging Face dataset name | a local .json/.jsonl/.parquet file."),
]
Split = Annotated[str, typer.Option(help="Dataset split (dev, test); ignored for local files.")]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="provider:name, scripted:PATH, or an OpenAI-compatible name.",
        show_default="$LLM_IDE_MODEL",
    ),
]
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
EnvironmentKind = Annotated[
    str, typer.Option("--environment", "--environment-class", help="docker (one container per instance) or local.")
]
Checkpoint = Annotated[
    str | None,
    typer.Option(help="sqlite:PATH | postgres://… | memory.", show_default="SQLite in each instance's folder"),
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
        min=0,
        help="Maximum operations per instance; 0: no limit.",
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
