"""Our docker network's creation lock, a file in the temp folder every user of the host shares: one a root run left
there (mode 0644) made every other user's docker run fail (`Permission denied` opening it to append), and root
followed a symbolic link planted under its name, creating the file it pointed to."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from conftest import base_image_client

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.docker.images import DEFAULT_NETWORK, ensure_network

pytestmark = pytest.mark.docker

LOCK = "llm-ide-docker-network.lock"
OTHER_USER = 65534  # nobody, in the group of the engine's socket


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder as /tmp is (sticky, everyone's), the temp folder of this process and its children."""
    if os.geteuid() != 0:
        pytest.skip("needs root (to run a child as another user)")
    folder = Path(tempfile.mkdtemp(prefix="llm-ide-test-shared-"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def as_another_user(home: Path) -> int:
    """`ensure_network` in a child forked from this process, then made another user in the socket's group: the modules
    it needs are loaded already (a fresh interpreter would need to read this checkout, 0700 under CI's temp folder)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(os.stat("/var/run/docker.sock").st_gid)
            os.setuid(OTHER_USER)
            os.environ["HOME"] = str(home)
            code = 0 if ensure_network(docker.from_env()) == DEFAULT_NETWORK else 3
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_the_lock_a_root_run_left_does_not_stop_another_users_run(shared_tmp: Path) -> None:
    assert ensure_network(base_image_client()) == DEFAULT_NETWORK and (shared_tmp / LOCK).exists()
    assert as_another_user(shared_tmp) == 0


def test_a_link_planted_as_the_lock_is_not_followed(shared_tmp: Path) -> None:
    (shared_tmp / LOCK).symlink_to(shared_tmp / "planted")
    with pytest.raises(EnvironmentFailure) as raised:
        ensure_network(base_image_client())
    assert not (shared_tmp / "planted").exists() and "\n" not in str(raised.value)
