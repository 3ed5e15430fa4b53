"""What a run writes gets the mode any file the user's umask makes would have, whichever way it is written (the
patch, the trajectory and the inspector's page are written atomically: a temporary file renamed, mkstemp's 0600)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from durability_support import setup_run

COMMANDS = """
import json, sys
from llm_ide.cli import app
for args in json.loads(sys.argv[1]):
    try:
        app(args)
    except SystemExit as end:
        if end.code:
            raise
"""


def llm_ide_with_umask(umask: str, commands: list[list[str]], cwd: Path) -> None:
    """The command lines one after the other in one process started with `umask` (llm_ide/fileio.py reads it once,
    as the process starts)."""
    command = f'umask {umask} && exec {sys.executable} -c "$0" "$@"'
    argv = ["sh", "-c", command, COMMANDS, json.dumps(commands)]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("umask", "mode"), [("022", 0o644), ("027", 0o640)])
def test_the_run_s_files_have_the_umask_s_mode(tmp_path: Path, umask: str, mode: int) -> None:
    _, args = setup_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (again := out / "again.html").write_text("the page before")
    again.chmod(0o604)
    inspect = ["inspect", str(out / "T.traj.json"), "--html"]
    llm_ide_with_umask(umask, [args, [*inspect, str(out / "T.html")], [*inspect, str(again)]], tmp_path)
    written = {name: stat.S_IMODE((out / name).stat().st_mode) for name in ("T.patch", "T.traj.json", "T.html")}
    assert written == dict.fromkeys(written, mode)
    assert stat.S_IMODE(again.stat().st_mode) == 0o604  # written again: the mode it had is kept
    assert again.read_text() == (out / "T.html").read_text()
