"""What a SWE-bench batch is asked to run, checked before the batch and the run are imported: its options and their
settings, its output folder, its dataset and the instances --shuffle, --filter and --slice choose; and the interrupt
that tells its caller to leave at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.config import deep_merge, load_config
from llm_ide.swebench.dataset import Dataset, Instance, load_dataset, select
from llm_ide.swebench.store import output_folder
from llm_ide.whole_settings import Settings


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
    repos: Path | None = None  # --environment local: the folder of `<owner>__<name>.bundle` files or clones


def batch_config(options: BatchOptions) -> Settings:
    values = deep_merge(options.config_values, {"environment": {"type": options.environment}})
    return load_config("swebench", list(options.config_files), **values)


@dataclass(frozen=True)
class Chosen:
    """A batch's dataset and the instances chosen in it, before those finished in its folder are skipped."""

    dataset: Dataset
    instances: list[Instance]


def choose(
    subset: str, split: str, output: Path, slice_spec: str = "", filter_regex: str = "", shuffle: bool = False
) -> Chosen:
    """A file in the output folder's place said, the dataset loaded, then shuffle → filter → slice (a DatasetError, a
    ValueError for --slice or --filter)."""
    if output.exists():
        output_folder(output)  # (made later, when the batch starts)
    dataset = load_dataset(subset, split)
    return Chosen(dataset, select(dataset.rows(), shuffle=shuffle, filter_regex=filter_regex, slice_spec=slice_spec))
