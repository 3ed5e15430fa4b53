"""Fixtures several test modules share, loaded by conftest.py as a plugin: a fixture imported into each module would
be a fixture of each module (ruff takes the import for unused), a session's once per module (Chromium started again,
the demo run made again). The headless Chromium and the demo run's page, once a worker; the served navigators'
token; `wheel` for the tools' index-less builds, once a session. What they need of the package is imported as they are
made: every pytest loads this plugin, xdist's controller and the suite's own pytests too, which make none (~1.5 s of CPU
each)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import unavailable
from navigator_mcp_support import TOKEN_VARIABLE


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium per worker (inspector_support.chromium)."""
    from inspector_support import chromium

    yield from chromium(tmp_path_factory)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """The demo run and its page, made once a worker (inspector_support.demo_run_in)."""
    from inspector_support import demo_run_in

    return demo_run_in(tmp_path_factory.getbasetemp())


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The served navigators' bearer token, in the variable both the servers and the clients read."""
    value = f"test-{uuid.uuid4().hex}"
    monkeypatch.setenv(TOKEN_VARIABLE, value)
    return value


@pytest.fixture(scope="session")
def build_backend(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> str:
    """A folder for PYTHONPATH holding `wheel` (<0.46: it has its own bdist_wheel), for the tools' first, index-less
    builds when the environments' `python3` cannot build a package without an index: its setuptools is older than
    70.1 and has no `wheel` (Python 3.11's stock 65.5). With it the build is the product's one without build isolation
    (no setuptools installed into a throwaway environment per build: ~1.5-2 s of CPU each). Downloaded once per
    session, for all xdist workers, by python3's own pip; "" when the interpreter builds offline by itself."""
    from llm_ide.tools.plan import BUILDS_WITHOUT_INDEX

    probe = tmp_path_factory.mktemp("probe") / "venv"  # what a tool's overlay venv sees: python3's own site
    subprocess.run(["python3", "-m", "venv", "--without-pip", "--system-site-packages", str(probe)], check=True)
    if subprocess.run([probe / "bin" / "python", "-c", BUILDS_WITHOUT_INDEX], capture_output=True).returncode == 0:
        return ""
    folder = session_cache / "build-backend"
    with (session_cache / "build-backend.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "wheel").is_dir():
            download(probe / "bin" / "python", tmp_path_factory, folder)
    return str(folder)


def download(python: Path, tmp_path_factory: pytest.TempPathFactory, folder: Path) -> None:
    """`wheel` from the package index, unpacked into `folder`; with `python`'s pip, else ensurepip's in a venv."""
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pip = tmp_path_factory.mktemp("pip") / "venv"  # a pip of its own: python3 may have none
        subprocess.run([sys.executable, "-m", "venv", str(pip)], check=True)
        python = pip / "bin" / "python"
    wheels = tmp_path_factory.mktemp("wheel")
    command = [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheels)]
    done = subprocess.run([*command, "wheel<0.46"], capture_output=True, text=True)
    if done.returncode != 0:
        unavailable(f"python3 cannot build packages offline and the package index is unreachable: {done.stderr[-300:]}")
    [wheel] = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(wheels / "unpacked")
    (wheels / "unpacked").rename(folder)  # whole or not at all
