from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
BASE_IMAGE = "llm-ide-base:bookworm"


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


def require_docker() -> None:
    """Skip without a Docker engine, except in CI where a missing engine is a failure."""
    if docker_available():
        return
    if os.environ.get("CI"):
        pytest.fail("CI is set but no Docker engine is reachable (scripts/start_docker.sh should have started one)")
    pytest.skip("no Docker engine reachable (run scripts/start_docker.sh)")


def base_image_client():
    """A Docker client, with the base image built (scripts/build_base_image.sh); skip without, fail in CI."""
    require_docker()
    import docker

    client = docker.from_env()
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        if os.environ.get("CI"):
            pytest.fail(f"{BASE_IMAGE} is missing in CI (scripts/build_base_image.sh should have built it)")
        pytest.skip(f"{BASE_IMAGE} is missing: build it with scripts/build_base_image.sh")
    return client


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_git_repo(path: Path, files: dict[str, str]) -> Path:
    """A real git repository holding `files`, committed once."""
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return path


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the repository: skipped on a clone without it, a failure under CI where it must exist."""
    if not (SHARED / "data").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {SHARED / 'data'} is absent (CI runs with ../shared beside the clone)")
        pytest.skip(f"{SHARED} is absent (the shared data lives beside the repository)")
    return SHARED


@pytest.fixture
def small_disk(tmp_path: Path):
    """An 8 MB tmpfs (a disk that fills up for real); skipped where mounting is not allowed (needs root)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"cannot mount a tmpfs: {result.stderr.decode().strip()}")
        pytest.skip(f"cannot mount a tmpfs (needs root): {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
