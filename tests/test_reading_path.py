"""The reading path of one step is measured, not listed: a default step (a `bash` action, after a warm-up) runs under
a tracer, and the package files whose code ran are the list docs/architecture.md holds (scripts/reading_path.py
writes it), within the figures scripts/architecture.py keeps."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from architecture import TARGETS  # noqa: E402
from conftest import require_bwrap  # noqa: E402
from reading_path import documented, traced_step  # noqa: E402

NODES = ["render_context", "reflect", "branch", "act", "execute_tool", "update_activity"]


def test_one_default_step_is_traced_and_the_docs_list_the_files_it_ran() -> None:
    require_bwrap()  # the documented step is the sandboxed one (unsandboxed, limits and sockets run other code)
    files = traced_step()
    assert next(iter(files)) == "llm_ide/graph.py"  # the step as the graph runs it: its edges and its nodes
    assert {f"llm_ide/nodes/{node}.py" for node in NODES} <= set(files)
    assert {"llm_ide/exchange.py", "llm_ide/verdict.py", "llm_ide/parsing.py"} <= set(files)  # text format
    assert "llm_ide/action_tools.py" not in files and "llm_ide/studio.py" not in files
    assert set(documented()) == set(files), "run `python scripts/reading_path.py --write`"
    assert len(files) <= TARGETS["reading_path_files"] and sum(files.values()) <= TARGETS["reading_path_lines"]
