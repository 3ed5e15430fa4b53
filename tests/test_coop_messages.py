"""The coop message channel during execution: agent 1's `send_message` reaches agent 2's prompt before its next step
(lockstep), and changes what agent 2 does; without the channel (coop_ablation) agent 2 does otherwise."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import act, reflect
from coop_support import TWO, scripts
from in_process import invoke
from test_coop_evaluate import build_task

from llm_ide.config import load_config
from llm_ide.coop.run import CoopRun, Setting, run_pair
from llm_ide.coop.settings import load_coop_settings
from llm_ide.coop.task import load_task

NOTE = "I append three() to pkg/core.py: keep out of it, put four() in pkg/extra.py"
LATER = "pkg/core.py is done: three() is at its end"
EXTRA = "def four():\n    return 4\n"


def pair_scripts(folder: Path) -> str:
    """Agent 2 creates pkg/extra.py when agent 1's note is in its prompt, else appends four() to pkg/core.py."""
    chosen = {
        "if_prompt_contains": NOTE,
        "then": act("Agent 1 owns core.py: a module of my own.", "create", path="pkg/extra.py", content=EXTRA),
        "else": act("Append four() to core.", "edit", path="pkg/core.py", old=TWO, new=TWO + "\n\n" + EXTRA),
    }
    return scripts(
        folder,
        plan_1=[act("Done.", "agreement_reached", plan="three() in pkg/core.py")],
        plan_2=[act("Done.", "agreement_reached", plan="four() somewhere")],
        run_1=[act("Tell agent 2 first.", "send_message", message=NOTE), reflect(False, "told"),
               act("Tell again.", "send_message", message=LATER), reflect(False, "told"),
               act("Append.", "edit", path="pkg/core.py", old=TWO, new=TWO + "\n\ndef three():\n    return 3\n"),
               reflect(False, "three added"), act("Submit.", "submit")],
        run_2=[chosen, reflect(False, "four added"), act("Submit.", "submit")],
    )  # fmt: skip


def run(tmp_path: Path, setting: Setting, **config: Any) -> Path:
    folder, source = build_task(tmp_path)
    task = load_task(folder)
    spec = CoopRun(task=task.folder, pair=(1, 2), setting=setting, model=pair_scripts(tmp_path / "scripts"),
                   repo_source=source)  # fmt: skip
    settings = load_config("default", environment={"tools": []}, **config)
    coop = load_coop_settings().model_copy(
        update={"execution": load_coop_settings().execution.model_copy(update={"lockstep": True})}
    )
    run_pair(spec, task, tmp_path / "out", settings, coop, evaluate=False)
    return tmp_path / "out" / spec.folder_name(task)


def operations(folder: Path, agent: str) -> list[dict]:
    return json.loads((folder / f"agent{agent}-run" / f"agent{agent}.traj.json").read_text())["operations"]


def first_prompt(folder: Path, agent: str) -> str:
    from llm_ide.run.trajectory import load_trajectory

    call = load_trajectory(folder / f"agent{agent}-run" / f"agent{agent}.traj.json")["model_calls"][0]
    return call.get("prompt") or "".join(message["content"] for message in call["messages"])


def test_agent_one_message_changes_agent_two_action(tmp_path: Path) -> None:
    folder = run(tmp_path, Setting.COOP)
    assert [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()] == [
        {"from": "1", "to": "2", "text": NOTE, "seq": 1},
        {"from": "1", "to": "2", "text": LATER, "seq": 2},
    ]
    sent = operations(folder, "1")[0]
    assert (sent["action_type"], sent["returncode"]) == ("send_message", 0)
    assert "Message sent to agent 2." in sent["observation"]
    agent2 = operations(folder, "2")
    assert [(op["action_type"], op["action_params"].get("path")) for op in agent2] == [
        ("create", "pkg/extra.py"),
        ("submit", None),
    ]
    received = json.loads((folder / "agent2-run" / "agent2.traj.json").read_text())["info"]["received"]
    assert received == [  # lockstep: the first before agent 2's first step, the second after it
        {"from": "1", "to": "2", "text": NOTE, "seq": 1, "step": 0},
        {"from": "1", "to": "2", "text": LATER, "seq": 2, "step": 1},
    ]
    prompt = first_prompt(folder, "2")
    assert f"## Messages from agent 1\n- {NOTE}" in prompt and LATER not in prompt
    from llm_ide.run.trajectory import load_trajectory

    prompts = [c["prompt"] for c in load_trajectory(folder / "agent2-run" / "agent2.traj.json")["model_calls"]]
    assert len(prompts) == 2 and prompts[1].startswith(prompts[0])  # one call per step, cached
    observation = prompts[1].rsplit(" (return code", 1)[1]  # the second prompt's last turn
    assert observation.index("Created pkg/extra.py") < observation.index(f"- {LATER}") < observation.index("Judge")
    assert "`<send_message>" in prompt  # the action is offered in coop execution
    assert "+def four():" in (folder / "patch_agent2.patch").read_text()
    assert "pkg/core.py" not in (folder / "patch_agent2.patch").read_text()
    trajectory = folder / "agent2-run" / "agent2.traj.json"
    shown = invoke("inspect", str(trajectory))
    assert f"message before operation 2, from agent 1: {LATER}" in shown.stdout, shown.stderr
    page = invoke("inspect", str(trajectory), "--html")
    assert page.returncode == 0, page.stderr
    html = (folder / "agent2-run" / "agent2.html").read_text()
    assert "before operation 1, from agent 1: I append three() to pkg/core.py" in html


def test_coop_execution_runs_the_variants_its_settings_ask_for(tmp_path: Path) -> None:
    """A navigator in the settings is in both agents' runs, beside the channel (its plan and gate off: no calls)."""
    folder = run(tmp_path, Setting.COOP, navigator={"mode": "model", "plan": False, "gate": []})
    infos = [json.loads((folder / f"agent{a}-run" / f"agent{a}.traj.json").read_text())["info"] for a in "12"]
    assert [(info["navigator"]["mode"], info["navigator"]["turns"]) for info in infos] == [("model", 0), ("model", 0)]
    assert [m["text"] for m in infos[1]["received"]] == [NOTE, LATER]
    assert "pkg/extra.py" in (folder / "patch_agent2.patch").read_text()  # agent 2 read agent 1's note


def test_without_the_channel_agent_two_acts_otherwise(tmp_path: Path) -> None:
    folder = run(tmp_path, Setting.COOP_ABLATION)
    assert not (folder / "messages.jsonl").exists()
    assert "only available when another agent works beside you" in operations(folder, "1")[0]["observation"]
    assert [op["action_type"] for op in operations(folder, "2")] == ["edit", "submit"]
    assert "Messages from agent" not in first_prompt(folder, "2")
    assert "send_message" not in first_prompt(folder, "2")
    assert "pkg/core.py" in (folder / "patch_agent2.patch").read_text()


@pytest.mark.parametrize(("contains", "expected"), [("needle", "yes"), ("absent", "no")])
def test_scripted_model_chooses_by_prompt(tmp_path: Path, contains: str, expected: str) -> None:
    from llm_ide.models import ScriptedModel

    path = tmp_path / "s.yaml"
    path.write_text(json.dumps([{"if_prompt_contains": contains, "then": "yes", "else": "no"}, "plain"]))
    model = ScriptedModel(path)
    assert model.complete([{"role": "user", "content": "a needle here"}], 0).text == expected
    assert model.complete([{"role": "user", "content": "x"}], 1).text == "plain"


@pytest.mark.slow
def test_a_lockstep_coop_run_killed_mid_execution_resumes_with_its_messages(tmp_path: Path) -> None:
    """In turns: agent 1 sends, agent 2 (seeing it) creates its module, agent 1 sends again, agent 2's command blocks
    on a gate file: the whole run is SIGKILLed there and run again; the message is neither sent nor received twice."""
    import os
    import signal

    import yaml
    from coop_support import coop_run

    task, source = build_task(tmp_path)
    gate = tmp_path / "gate"  # outside the worktree: the rerun puts the worktree back and runs the command again
    block = f"touch started && while [ ! -e {gate} ]; do sleep 0.2; done && rm -f started"
    model = pair_scripts(tmp_path / "scripts")
    script = tmp_path / "scripts" / "run_2.yaml"
    responses = yaml.safe_load(script.read_text())["responses"]
    script.write_text(yaml.safe_dump({"responses": [*responses[:2], act("Wait.", "bash", command=block),
                                                    reflect(False, "waited"), responses[-1]]}))  # fmt: skip
    lockstep = tmp_path / "coop.yaml"
    lockstep.write_text(yaml.safe_dump({"execution": {"lockstep": True}}))
    out = tmp_path / "out"
    folder = out / "demo_task7_f1_f2_coop_k0"
    first = coop_run(task, source, model, out, "--coop-config", str(lockstep), start_new_session=True)
    while not (folder / "agent2" / "started").exists():
        assert first.poll() is None, first.communicate()
        subprocess.run(["sleep", "0.1"], check=True)
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    assert not (folder / "patch_agent1.patch").exists()  # agent 1 waits for its turn behind agent 2
    gate.touch()
    second = coop_run(task, source, model, out, "--coop-config", str(lockstep))
    stdout, stderr = second.communicate(timeout=600)
    assert second.returncode == 0, stdout + stderr
    result = json.loads((folder / "eval.json").read_text())
    assert (result["merge"]["status"], result["both_passed"]) == ("clean", True)
    assert len((folder / "messages.jsonl").read_text().splitlines()) == 2
    assert [op["action_type"] for op in operations(folder, "1")] == ["send_message", "send_message", "edit", "submit"]
    assert [op["action_type"] for op in operations(folder, "2")] == ["create", "bash", "submit"]
    from llm_ide.run.trajectory import load_trajectory

    last = load_trajectory(folder / "agent2-run" / "agent2.traj.json")["model_calls"][-1]
    prompt = last.get("prompt") or "".join(m["content"] for m in last["messages"])
    assert prompt.count(f"- {NOTE}") == 1
