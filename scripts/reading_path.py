#!/usr/bin/env python
"""The reading path of one step, traced rather than listed: a run of the default settings (a scripted model, the local
environment, a small repository) whose third step is a `bash` action, every call of a package function recorded while
the graph runs that step (its nodes and its edges: the code of `llm_ide/graph.py` and everything beneath it); the
first two steps warm the run up (the memory's first snapshot, the first imports).

`python scripts/reading_path.py` prints the files in the order their code first ran, with their lines, and a
`RESULT files=… lines=…` line; `--write` puts that list between the reading-path markers of docs/architecture.md
(each file with the first line of its docstring), which `scripts/architecture.py` counts and
`tests/test_reading_path.py` keeps in step with the trace.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llm_ide"
GRAPH = str(PACKAGE / "graph.py")
DOCS = ROOT / "docs" / "architecture.md"
MARKERS = re.compile(r"(<!-- reading path -->\n)(.*?)(<!-- /reading path -->)", re.DOTALL)
TRACED_STEP = 2  # the third operation: a `bash` action, two steps after the first
FILES = {"calc.py": "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"}
REPLIES = [
    "Read the module.\n<view>" + '{"path": "calc.py"}' + "</view>",
    "good: calc.py defines add[1](calc.py:1).\nRun it.\n<bash>python3 calc.py</bash>",
    "good: it printed 3.\nRun it once more.\n<bash>python3 calc.py</bash>",
    "good: it printed 3 again.\nDone.\n<submit></submit>",
]


class Tracer:
    """The package files whose code runs while the graph runs one step (in any thread), in order of first call."""

    def __init__(self, step: int) -> None:
        self.step, self.files, self.depth = step, {}, threading.local()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        depth = getattr(self.depth, "value", 0)
        if event == "call":
            filename = frame.f_code.co_filename
            if depth == 0 and filename == GRAPH and self.in_step(frame):
                self.depth.value = depth = 1
            elif depth:
                self.depth.value = depth = depth + 1
            if depth and filename.startswith(str(PACKAGE)):
                self.files.setdefault(filename, len(self.files))
        elif event == "return" and depth:
            self.depth.value = depth - 1

    def in_step(self, frame: Any) -> bool:
        state = frame.f_locals.get("state")
        return isinstance(state, dict) and state.get("n_operations", 0) == self.step and "task" in state


def traced_step(step: int = TRACED_STEP) -> dict[str, int]:
    """The package files (relative paths) whose code ran in the step, in order of first call, with their lines."""
    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    with tempfile.TemporaryDirectory(prefix="llm-ide-reading-path-") as folder:
        repo = Path(folder) / "repo"
        repo.mkdir()
        for name, text in FILES.items():
            (repo / name).write_text(text)
        for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *command], cwd=repo, check=True)
        script = Path(folder) / "script.yaml"
        script.write_text(yaml.safe_dump({"responses": REPLIES}))
        tracer = Tracer(step)
        settings = load_config("default", environment={"tools": []}, agent={"cost_limit": 0})
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            result = run_task(
                "Run calc.py.", model=f"scripted:{script}", settings=settings, output_dir=Path(folder) / "out",
                run_id="path", repo=repo,
            )  # fmt: skip
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        if result.exit_status != "submitted":
            raise SystemExit(f"the traced run ended {result.exit_status}, not submitted")
    ordered = sorted(tracer.files, key=tracer.files.__getitem__)
    return {str(Path(name).relative_to(ROOT)): len(Path(name).read_text().splitlines()) for name in ordered}


def summary(path: str) -> str:
    """What the generated reading path says of a module: its docstring's first sentence, else its first class's or
    function's."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    documented = [tree, *(node for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef))]
    docs = [doc for node in documented if (doc := ast.get_docstring(node))]
    text = next((doc for doc in docs if "SPEC" not in doc), "")  # the docs point to nothing outside the repository
    sentence = re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0]
    return sentence if len(sentence) <= 160 else sentence[:160].rsplit(" ", 1)[0] + " …"


def rendered(files: dict[str, int]) -> str:
    """The reading path as docs/architecture.md holds it (between its markers): each file and what it is."""
    lines = [
        f"Traced, not listed: the {len(files)} files whose code runs in one default step (a `bash` action, after a "
        "warm-up), in the order their code first runs (`python scripts/reading_path.py --write` writes this list, "
        "`python scripts/reading_path.py` prints their lines; `tests/test_reading_path.py` keeps it true).",
        "",
    ]
    lines += [f"{n}. `{path}` — {summary(path)}" for n, path in enumerate(files, 1)]
    return "\n".join(lines) + "\n"


def documented() -> list[str]:
    """The files docs/architecture.md lists as the reading path."""
    found = MARKERS.search(DOCS.read_text(encoding="utf-8"))
    return re.findall(r"^\d+\. `(llm_ide/[\w/]+\.py)`", found.group(2), re.MULTILINE) if found else []


def main(write: Annotated[bool, typer.Option(help="Write the list into docs/architecture.md.")] = False) -> None:
    files = traced_step()
    for path, size in files.items():
        print(f"{size:6d}  {path}")
    if write:
        text = DOCS.read_text(encoding="utf-8")
        DOCS.write_text(MARKERS.sub(lambda m: m.group(1) + rendered(files) + m.group(3), text, count=1))
    print(f"RESULT files={len(files)} lines={sum(files.values())}")


if __name__ == "__main__":
    typer.run(main)
