"""The shared mini-swe-agent trajectories as test material: their real bash commands, and their repositories checked
out at the instance's base commit."""

from __future__ import annotations

import json
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


def checkout(shared: Path, instance: str, destination: Path) -> Path:
    """The instance's repository at its base commit: a clone of the shared bundle's branch named after it."""
    bundle = shared / "data" / "repos" / f"{instance.rsplit('-', 1)[0]}.bundle"
    subprocess.run(["git", "clone", "-q", str(bundle), str(destination), "-b", instance], check=True)
    return destination
