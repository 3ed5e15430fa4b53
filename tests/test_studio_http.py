"""docs/studio.md as written (issue 40 §2): its curl and `langgraph_sdk` blocks start, stream, interrupt and resume a
run against `langgraph dev`. The test only adds the synchronisation a person does by eye: a run is interrupted once its
command is under way (a file it writes), and the command is let go after."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from test_studio import ROOT, gated_run, studio  # noqa: F401  (the fixture: `langgraph dev` on a free port)

DOC = ROOT / "docs" / "studio.md"


def blocks() -> dict[str, str]:
    """The doc's code blocks by the name of the marker above each."""
    found = re.findall(r"<!-- studio-http: ([\w-]+) -->\n```\w+\n(.*?)```", DOC.read_text(), re.DOTALL)
    return dict(found)


def setting(tmp_path: Path, url: str) -> tuple[dict[str, str], Path]:
    """The environment the blocks read (URL, TASK, REPO, MODEL) and the gate the run's command waits for."""
    repo, gate, model = gated_run(tmp_path, "touch started; ")
    (tmp_path / "config.yaml").write_text("environment: {tools: []}\n")
    env = {**os.environ, "URL": url, "TASK": "Fix to_fahrenheit.", "REPO": str(repo), "MODEL": model}
    return env, gate


def wait_for(path: Path) -> str:
    return f"while [ ! -e {path} ]; do sleep 0.05; done\n"


@pytest.mark.slow
def test_the_curl_blocks_start_stream_interrupt_and_resume_a_run(studio: str, tmp_path: Path) -> None:  # noqa: F811
    env, gate = setting(tmp_path, studio)
    doc = blocks()
    started = Path(env["REPO"]) / "started"
    script = "set -e\n" + doc["thread"] + f"touch {gate}\n" + doc["stream"]
    script += f"rm -f {gate} {started}\necho ---\n" + doc["start"] + wait_for(started) + doc["interrupt"]
    script += f"touch {gate}\n" + doc["resume"]
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    streamed, after = done.stdout.split("\n---\n")
    events = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")]
    commands = [event for event in events if event.get("event") == "command"]
    assert [event["kind"] for event in commands][0] == "start" and commands[-1]["kind"] == "end"
    assert commands[-1]["lines"] == ["let go"] and commands[-1]["returncode"] == 0
    assert any(event.get("event") == "model" for event in events)  # the model calls, as they happen
    assert "event: updates" in streamed and streamed.rstrip().endswith("submitted")
    status, next_nodes, final = after.strip().splitlines()[-3:]
    assert (status, final) == ("interrupted", "submitted")
    assert next_nodes == "['execute_tool']"  # where it stopped: the command's step


@pytest.mark.slow
def test_the_python_blocks_do_the_same_with_langgraph_sdk(studio: str, tmp_path: Path) -> None:  # noqa: F811
    env, gate = setting(tmp_path, studio)
    doc = blocks()
    started = Path(env["REPO"]) / "started"
    program = f"import pathlib, time\npathlib.Path({str(gate)!r}).touch()\n" + doc["python-stream"]
    program += f"pathlib.Path({str(gate)!r}).unlink()\npathlib.Path({str(started)!r}).unlink()\nprint('---')\n"
    program += doc["python-start"]
    program += f"while not pathlib.Path({str(started)!r}).exists():\n    time.sleep(0.05)\n"
    program += doc["python-resume"].replace(
        "final = client.runs.wait", f"pathlib.Path({str(gate)!r}).touch()\nfinal = client.runs.wait"
    )
    done = subprocess.run(["python", "-c", program], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    streamed, after = done.stdout.split("---\n")
    command = f"touch started; while [ ! -e {gate} ]; do sleep 0.05; done; echo let go"
    assert streamed.splitlines() == [f"ran {command} → 0", "submitted"]
    assert after.splitlines() == ["interrupted", "submitted"]
