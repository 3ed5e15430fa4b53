"""A writer of a batch's output store, for threads and for processes of their own: a child imports only this and the
store, not a test module and all it imports (~3 s of CPU). The store imports LangGraph (llm_ide.run.outputs): a child
defers what every llm-ide process defers (llm_ide/deferred.py; ~1.2 s of CPU, not ~1.7)."""

from __future__ import annotations

import sys
from pathlib import Path

from llm_ide import deferred

if __name__ == "__main__":
    deferred.install()

from llm_ide.swebench.store import OutputStore  # noqa: E402  (after the deferral, in a child)


def writer_process(output: Path, prefix: str, count: int) -> None:
    store = OutputStore(output)
    for n in range(count):
        store.add_prediction(f"{prefix}-{n}", "m", f"patch {n}\n")
        store.record_status(f"{prefix}-{n}", "submitted", cost=0.0)


if __name__ == "__main__":
    writer_process(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
