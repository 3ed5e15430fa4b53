"""The shared mini-swe-agent trajectories as test material: their real bash commands, and their repositories checked
out at the instance's base commit."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from pathlib import Path

BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def bash_commands(shared: Path, instance: str) -> list[str]:
    """Every bash block the model wrote, in order (a reply with two blocks, which mini-swe-agent refused, included)."""
    path = shared / "data" / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json"
    messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    return [block for m in messages if m["role"] == "assistant" for block in BASH_BLOCK.findall(m["content"])]


def real_command(shared: Path, instance: str, start: str) -> str:
    """The first command of the trajectory that starts with `start` (so a test runs what the model really ran)."""
    found = [command for command in bash_commands(shared, instance) if command.startswith(start)]
    assert found, f"no command of {instance} starts with {start!r}"
    return found[0].strip()


def checkout(shared: Path, instance: str, destination: Path, cache: Path) -> Path:
    """The instance's repository at its base commit: a clone of the shared bundle's branch named after it. Its objects
    are those of one bare clone of the bundle in `cache` (the session's, which xdist's workers share: the first to ask
    unpacks the bundle while the others wait, ~1 s of CPU for sympy's; a clone is then its checkout alone)."""
    name = instance.rsplit("-", 1)[0]
    bare = cache / "bundles" / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    with (bare.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not bare.is_dir():
            unpacked = bare.with_name(f"{name}.{os.getpid()}.git")
            bundle = shared / "data" / "repos" / f"{name}.bundle"
            subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(unpacked)], check=True)
            unpacked.rename(bare)
    subprocess.run(["git", "clone", "-q", "--shared", "-b", instance, str(bare), str(destination)], check=True)
    return destination
