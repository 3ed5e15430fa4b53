"""What the tests of `llm-ide navigator serve` share (test_navigator_mcp, test_navigator_mcp_clients,
test_navigator_mcp_shutdown): a server started on a free loopback port and stopped, the token's variable, the
diffs the navigators are asked about."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]
READY = "navigator serving at "
TOKEN_VARIABLE = "LLM_IDE_NAVIGATOR_TOKEN"  # where servers and clients find the token (documented)
TESTS_DIFF = "--- a/tests/test_cart.py\n+++ b/tests/test_cart.py\n@@ -1 +1 @@\n-assert total == 9\n+assert True\n"
CODE_DIFF = "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1 +1 @@\n-RATE = 0.1\n+RATE = 0.2\n"


def launch(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`llm-ide navigator serve --port 0 ARGS…` with `env`: the process, its URL once it accepts requests, and the
    lines it printed before."""
    log = tmp_path / f"serve-{uuid.uuid4().hex[:8]}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*CLI, "navigator", "serve", "--port", "0", *args],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    printed = []
    for line in process.stdout:
        if line.startswith(READY):
            return process, line.removeprefix(READY).strip(), printed
        printed.append(line)
    process.wait(timeout=30)
    pytest.fail(f"navigator serve exited {process.returncode} before it was ready: {log.read_text()}")


def stop(process: subprocess.Popen[str]) -> int:
    process.terminate()
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
    finally:
        process.stdout.close()
