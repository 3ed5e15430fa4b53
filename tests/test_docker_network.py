"""Our docker network's creation lock, a file in the temp folder every user of the host shares: one a root run left
there (mode 0644) made every other user's docker run fail (`Permission denied` opening it to append), and root
followed a symbolic link planted under its name, creating the file it pointed to."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import base_image_client

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.docker.images import DEFAULT_NETWORK, ensure_network

pytestmark = pytest.mark.docker

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = "llm-ide-docker-network.lock"
OTHER_USER = 65534  # nobody, in the group of the engine's socket
AS_ANOTHER_USER = (
    "import docker; from llm_ide.environments.docker.images import ensure_network as e; print(e(docker.from_env()))"
)


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder as /tmp is (sticky, everyone's), the temp folder of this process and its children."""
    if os.geteuid() != 0 or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root (to run a child as another user) and a system python3")
    folder = Path(tempfile.mkdtemp(prefix="llm-ide-test-shared-"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def test_the_lock_a_root_run_left_does_not_stop_another_users_run(shared_tmp: Path) -> None:
    assert ensure_network(base_image_client()) == DEFAULT_NETWORK and (shared_tmp / LOCK).exists()
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    done = subprocess.run(
        ["/usr/bin/python3", "-c", AS_ANOTHER_USER],
        env={"PYTHONPATH": f"{REPO_ROOT}:{site}", "TMPDIR": str(shared_tmp), "HOME": str(shared_tmp)},
        user=OTHER_USER,
        group=os.stat("/var/run/docker.sock").st_gid,
        capture_output=True,
        text=True,
        cwd=shared_tmp,
    )
    assert done.returncode == 0 and done.stdout == f"{DEFAULT_NETWORK}\n", done.stderr


def test_a_link_planted_as_the_lock_is_not_followed(shared_tmp: Path) -> None:
    (shared_tmp / LOCK).symlink_to(shared_tmp / "planted")
    with pytest.raises(EnvironmentFailure) as raised:
        ensure_network(base_image_client())
    assert not (shared_tmp / "planted").exists() and "\n" not in str(raised.value)
