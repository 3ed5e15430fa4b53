"""What a run writes gets the mode any file the user's umask makes would have, whichever way it is written (the
patch, the trajectory and the inspector's page are written atomically: a temporary file renamed, mkstemp's 0600)."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from durability_support import setup_run


def llm_ide_with_umask(umask: str, args: list[str], cwd: Path) -> None:
    command = f"umask {umask} && exec {sys.executable} -c 'from llm_ide.cli import app; app()' \"$@\""
    done = subprocess.run(["sh", "-c", command, "llm-ide", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("umask", "mode"), [("022", 0o644), ("027", 0o640)])
def test_the_run_s_files_have_the_umask_s_mode(tmp_path: Path, umask: str, mode: int) -> None:
    _, args = setup_run(tmp_path)
    llm_ide_with_umask(umask, args, tmp_path)
    out = tmp_path / "out"
    llm_ide_with_umask(umask, ["inspect", str(out / "T.traj.json"), "--html", str(out / "T.html")], tmp_path)
    written = {name: stat.S_IMODE((out / name).stat().st_mode) for name in ("T.patch", "T.traj.json", "T.html")}
    assert written == dict.fromkeys(written, mode)
    (out / "T.html").chmod(0o604)
    llm_ide_with_umask(umask, ["inspect", str(out / "T.traj.json"), "--html", str(out / "T.html")], tmp_path)
    assert stat.S_IMODE((out / "T.html").stat().st_mode) == 0o604  # written again: the mode it had is kept
