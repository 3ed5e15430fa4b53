"""A writer of a batch's output store, for threads and for processes of their own: a child imports only this and the
store (~0.3 s of CPU), not a test module and all it imports (~3 s)."""

from __future__ import annotations

import sys
from pathlib import Path

from llm_ide.swebench.store import OutputStore


def writer_process(output: Path, prefix: str, count: int) -> None:
    store = OutputStore(output)
    for n in range(count):
        store.add_prediction(f"{prefix}-{n}", "m", f"patch {n}\n")
        store.record_status(f"{prefix}-{n}", "submitted", cost=0.0)


if __name__ == "__main__":
    writer_process(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
