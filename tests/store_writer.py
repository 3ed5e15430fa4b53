"""A writer of a batch's output store, for the threads and the forked processes of
test_output_store_survives_concurrent_threads_and_processes."""

from __future__ import annotations

from pathlib import Path

from llm_ide.swebench.store import OutputStore


def writer_process(output: Path, prefix: str, count: int) -> None:
    store = OutputStore(output)
    for n in range(count):
        store.add_prediction(f"{prefix}-{n}", "m", f"patch {n}\n")
        store.record_status(f"{prefix}-{n}", "submitted", cost=0.0)
