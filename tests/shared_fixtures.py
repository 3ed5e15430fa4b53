"""Fixtures several test modules share, loaded by conftest.py as a plugin: a fixture imported into each module would
be a fixture of each module (ruff takes the import for unused), a session's once per module (Chromium started again,
the demo run made again). The headless Chromium and the demo run's page, once a worker; the served navigators'
token."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from inspector_support import chromium, demo_run_in
from navigator_mcp_support import TOKEN_VARIABLE


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium per worker (inspector_support.chromium)."""
    yield from chromium(tmp_path_factory)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """The demo run and its page, made once a worker (inspector_support.demo_run_in)."""
    return demo_run_in(tmp_path_factory.getbasetemp())


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The served navigators' bearer token, in the variable both the servers and the clients read."""
    value = f"test-{uuid.uuid4().hex}"
    monkeypatch.setenv(TOKEN_VARIABLE, value)
    return value
