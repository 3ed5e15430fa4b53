"""What the sandboxed commands may change in the repository (its `.git` included) is never trusted by llm-ide's own
code outside the sandbox, and the user's home stays hidden whatever $HOME says. Run as root, as CI runs them."""

from __future__ import annotations

import os
import pwd
import uuid
from pathlib import Path

import pytest
from conftest import make_git_repo, require_bwrap

from llm_ide.config import load_config
from llm_ide.environments import make_environment


def test_the_users_home_is_hidden_when_home_names_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$HOME set elsewhere (`sudo -E`, a CI container's HOME=/github/home): the home passwd names (root's /root, with
    its ~/.ssh) is hidden as well, and shows the run's own home as ~ does."""
    require_bwrap()
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    probe = home / f".llm-ide-probe-{uuid.uuid4().hex[:8]}"
    marker = f"home-secret-{uuid.uuid4().hex}"
    probe.write_text(marker)
    probe.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = make_environment(load_config("default").environment, repo, "h", None, tmp_path / "tools")
    try:
        result = env.execute(f"cat {probe}; echo kept > {home}/left; cat {home}/left ~/left; echo done")
    finally:
        env.close()
        probe.unlink()
    assert marker not in result.output and result.output.endswith("kept\nkept\ndone\n"), result.output
    assert not (home / "left").exists()
