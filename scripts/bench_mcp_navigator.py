#!/usr/bin/env python3
"""Benchmark: what asking the navigator over MCP costs per permission request, side by side in one run.

One `llm-ide navigator serve` process on a free loopback port serves a rule-based navigator (no model: the figures
are the transport alone). Three ways to ask it the same permission request `--requests` times:
- in process: the navigator object called directly (what `navigator.mode: model` pays besides the model);
- McpNavigator: the driver's client, one connection (HTTP + MCP discovery) per request, as a run uses it;
- one SDK session: the MCP SDK's client with one connection for all requests (the transport's floor).
Prints a table of median and p90 milliseconds, then one `RESULT` line.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import httpx2
import typer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from remote_navigators import RulesNavigator  # noqa: E402

from llm_ide.navigator.mcp_client import McpNavigator  # noqa: E402
from llm_ide.navigator.protocol import TOKEN_VARIABLE, PermissionRequest  # noqa: E402

DIFF = "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -14 +14 @@\n-    total += price\n+    total += price * q\n"
REQUEST = PermissionRequest(action='edit {"path": "shop/cart.py"}', diff=DIFF, reason="navigator.gate: edit")


def timed(call: Callable[[], object], n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


async def one_session(url: str, n: int) -> list[float]:
    headers = {"Authorization": f"Bearer {os.environ[TOKEN_VARIABLE]}"}
    times = []
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        for _ in range(n):
            start = time.perf_counter()
            await client.call_tool("request_permission", REQUEST.model_dump(include={"action", "diff", "reason"}))
            times.append((time.perf_counter() - start) * 1000)
    return times


def main(
    requests: Annotated[int, typer.Option(help="Requests per way of asking.")] = 50,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    requests = 3 if quick else requests
    os.environ[TOKEN_VARIABLE] = secrets.token_urlsafe(32)  # the server's and both clients'
    server = subprocess.Popen(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", "navigator", "serve", "--port", "0"]
        + ["--navigator", "remote_navigators:RulesNavigator"],
        env={**os.environ, "PYTHONPATH": str(TESTS)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = next(line for line in server.stdout if "serving at" in line).strip().rsplit(" ", 1)[-1]
        navigator = McpNavigator(url)
        navigator.request_permission(REQUEST)  # warm-up: imports, first connection
        rows = {
            "in process": timed(lambda: RulesNavigator().request_permission(REQUEST), requests),
            "McpNavigator (a connection per request)": timed(lambda: navigator.request_permission(REQUEST), requests),
            "MCP SDK client, one session": asyncio.run(one_session(url, requests)),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
    table = Table(title=f"permission requests to a served navigator without a model ({requests} each)")
    for column in ("way of asking", "median ms", "p90 ms"):
        table.add_column(column)
    figures = {}
    for name, times in rows.items():
        median, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
        figures[name] = median
        table.add_row(name, f"{median:.2f}", f"{p90:.2f}")
    Console().print(table)
    values = list(figures.values())
    print(f"RESULT inprocess_ms={values[0]:.3f} mcp_request_ms={values[1]:.1f} mcp_session_call_ms={values[2]:.1f}")


if __name__ == "__main__":
    typer.run(main)
