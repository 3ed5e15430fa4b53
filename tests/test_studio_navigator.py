"""A human navigator in LangGraph Studio: a real `langgraph dev` server runs the navigator graph until its interrupt;
the thread is resumed through `langgraph_sdk` with a denial, then an approval, and the run ends submitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from test_studio import BUGGY, TEST, studio  # noqa: F401  (the `langgraph dev` fixture)

WRONG = act("Subtract less[1](temps.py:5).", "edit", path="temps.py", old="9 / 5 - 32", new="9 / 5 - 0")
RIGHT = act("The offset's sign[1](temps.py:5).", "edit", path="temps.py", old="9 / 5 - 32", new="9 / 5 + 32")
SCRIPT = [
    act("Read it[1](temps.py:4).", "view", path="temps.py", start_line=1, end_line=10),
    reflect(False, "to_fahrenheit subtracts 32."),
    WRONG,
    RIGHT,
    reflect(False, "to_fahrenheit now adds 32."),
    act("Run the tests[1](temps.py:5).", "bash", command="python3 -m unittest -q test_temps 2>&1"),
    reflect(False, "The test passes."),
    act("Fixed and tested; submit.", "submit"),
]


@pytest.mark.slow
def test_a_human_navigator_denies_then_approves_by_resuming_the_thread(studio: str, tmp_path: Path) -> None:  # noqa: F811
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    client = get_sync_client(url=studio)
    (assistant,) = client.assistants.search(graph_id="llm-ide-navigator")
    thread = client.threads.create()["thread_id"]
    inputs = {
        "task": "Fix to_fahrenheit.",
        "repo": str(repo),
        "model": write_script(tmp_path / "script.yaml", SCRIPT),
        "config": {"environment": {"tools": []}, "navigator": {"gate": ["edit"]}},
    }
    client.runs.wait(thread, assistant["assistant_id"], input=inputs, raise_error=True)

    state = client.threads.get_state(thread)
    assert state["next"] == ["execute_tool"]  # the gate asks inside the action it wraps
    (question,) = [interrupt["value"] for interrupt in state["interrupts"]]
    assert question["kind"] == "permission" and "9 / 5 - 0" in question["diff"]
    assert "- 32" in (repo / "temps.py").read_text()

    deny = {"approved": False, "reason": "Dropping the offset is wrong: add 32."}
    client.runs.wait(thread, assistant["assistant_id"], command={"resume": deny}, raise_error=True)
    state = client.threads.get_state(thread)
    assert state["next"] == ["execute_tool"]  # the gate asks inside the action it wraps
    (question,) = [interrupt["value"] for interrupt in state["interrupts"]]
    assert "9 / 5 + 32" in question["diff"]
    assert state["values"]["operations"][1]["marks"]["denied"] == {"reason": deny["reason"], "by": "human"}

    approve = {"approved": True, "reason": "Right."}
    final = client.runs.wait(thread, assistant["assistant_id"], command={"resume": approve}, raise_error=True)
    assert final["exit_status"] == "submitted"
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]
    ops = final["operations"]
    assert [(o["id"], o["parent_id"], o["action_type"]) for o in ops] == [
        (0, None, "view"), (1, 0, "edit"), (2, 0, "edit"), (3, 2, "bash"), (4, 3, "submit")
    ]  # fmt: skip
    decisions = final["navigator"]["decisions"]
    assert [(d["approved"], d["by"], d["reason"]) for d in decisions] == [
        (False, "human", deny["reason"]), (True, "human", "Right.")
    ]  # fmt: skip
    assert client.threads.get_state(thread)["next"] == []
