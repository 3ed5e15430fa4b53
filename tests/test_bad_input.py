"""Bad input from models and users (issue 23 §4): a reply with lone surrogates goes through the run, a scripted
model file that is not UTF-8 or holds no reply is one line."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect
from conftest import make_git_repo
from in_process import invoke


def llm_ide(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd)


def run_args(tmp_path: Path, script: Path) -> list[str]:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    return ["run", "--repo", str(repo), "--task", "t", "--model", f"scripted:{script}", "--thread-id", "s"] + [
        "--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml"),
    ]  # fmt: skip


def test_lone_surrogates_in_replies_are_replaced_and_the_run_is_saved(tmp_path: Path) -> None:
    """YAML's \\ud800 escapes give lone surrogates, as a lenient decoder of a model's bytes may: in a thought, a
    command, a reflection. Each is replaced at the boundary; every file of the run is valid UTF-8."""
    script = tmp_path / "script.yaml"
    replies = [
        act("Look at \ud800 this.", "create", path="notes.txt", content="a \udfff note\n"),
        reflect(False, "made \udc00 it"),
        act("Done.", "submit"),
    ]
    # json.dumps keeps the surrogates as escapes YAML reads back as lone surrogates
    script.write_text("responses:\n" + "".join(f"  - {json.dumps(reply)}\n" for reply in replies))
    result = llm_ide(tmp_path, *run_args(tmp_path, script))
    assert result.returncode == 0, result.stderr
    assert "submitted" in result.stdout and "Traceback" not in result.stderr
    out = tmp_path / "out"
    trajectory = json.loads((out / "s.traj.json").read_bytes().decode("utf-8"))
    assert trajectory["info"]["exit_status"] == "submitted"
    assert [op["thought"] for op in trajectory["operations"]] == ["Look at \ufffd this.", "Done."]
    assert trajectory["operations"][0]["summary"] == "made \ufffd it"
    assert (tmp_path / "repo" / "notes.txt").read_text(encoding="utf-8") == "a \ufffd note\n"
    assert "+a \ufffd note" in trajectory["info"]["submission"]
    calls = gzip.decompress((out / "s.calls.jsonl.gz").read_bytes()).decode("utf-8")
    assert calls.count("\ufffd") >= 3 and "\\ud800" not in calls
    with sqlite3.connect(out / "s.checkpoint.sqlite") as db:
        assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] > 0


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("responses:\n  - 'caf\u00e9'\n".encode("latin-1"), "is not UTF-8 text (byte 19: invalid continuation byte)"),
        (b"", "is empty: give it a list of replies, one per model call"),
        (b"# no reply yet\n", "is empty: give it a list of replies, one per model call"),
        (b"[]\n", "has no replies: give it a list of replies, one per model call"),
        (b"responses: []\n", "has no replies: give it a list of replies, one per model call"),
    ],
)
def test_a_scripted_model_file_it_cannot_play_is_one_line(tmp_path: Path, content: bytes, said: str) -> None:
    """A script of no replies was a run started and failed at its first call (model_error, exit 1)."""
    script = tmp_path / "script.yaml"
    script.write_bytes(content)
    result = llm_ide(tmp_path, *run_args(tmp_path, script))
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0] == f"error: scripted model: {script} {said}"
    assert not (tmp_path / "out" / "s.traj.json").exists()
