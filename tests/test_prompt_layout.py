from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo

from llm_ide.config import load_config
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

ARGPARSE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"
TASK = "`ArgumentParser.parse_known_args` applies a default twice when the option is given; find where and fix it."
SCRIPT = [
    act("Start at the parser class[1](argparse.py:1).", "view", path="argparse.py", start_line=1, end_line=110),
    reflect(False, "The module header and imports; the parser classes come later."),
    act("Defaults are set in parse_known_args[1](argparse.py:100).", "search", pattern=r"def parse_known_args"),
    reflect(True, "The search found nothing useful.", "Search with the method's full signature."),
    act("Read the definition instead.", "view_symbol", path="argparse.py", symbol="ArgumentParser.parse_known_args"),
    reflect(False, "parse_known_args fills defaults before parsing."),
    act("Check it compiles[1](argparse.py:1).", "bash", command="python3 -m py_compile argparse.py && echo ok"),
    reflect(False, "It compiles."),
    act("Done.", "submit"),
]


def run_session(tmp_path: Path, agent: dict | None = None, **memory: object) -> dict:
    settings = load_config("default", environment={"tools": []}, agent=agent or {}, memory=memory)
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n"})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    result = run_task(
        TASK,
        model=write_script(tmp_path / "script.yaml", SCRIPT),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo,
    )
    assert result.exit_status == "submitted"
    return load_trajectory(result.trajectory_path)


def test_the_act_call_continues_the_reflect_call(tmp_path: Path) -> None:
    calls = run_session(tmp_path, agent={"single_call": False})["model_calls"]
    pairs = [(calls[i]["prompt"], calls[i + 1]["prompt"]) for i, c in enumerate(calls) if c["kind"] == "reflect"]
    assert len(pairs) == 4
    for reflect_prompt, act_prompt in pairs:
        shared = len(os.path.commonprefix([reflect_prompt, act_prompt]))
        assert shared == len(reflect_prompt)
        assert shared >= 0.95 * len(act_prompt)
    good, bad = pairs[0][1][len(pairs[0][0]) :], pairs[1][1][len(pairs[1][0]) :]
    assert "## Next step" in good and "## Alternative action" not in good
    assert "## Alternative action" in bad and "bad: The search found nothing useful." in bad
    system = calls[0]["prompt"].split("\n\n[user]\n", 1)[0]
    assert all(c["prompt"].startswith(system) for c in calls)
    actions_line = '<view_symbol>{"path": "<file>"'
    assert all(c["prompt"].count(actions_line) == 1 for c in calls)  # the actions text only in the system part


def test_within_an_epoch_every_prompt_extends_the_previous_one(tmp_path: Path) -> None:
    calls = run_session(tmp_path, agent={"single_call": False}, snapshot_every=3)["model_calls"]
    prompts = [c["prompt"] for c in calls]
    renewed = [i for i in range(1, len(prompts)) if not prompts[i].startswith(prompts[i - 1])]
    # calls: act 0 | reflect 0, act 1 | reflect 1, act 2 | reflect 2, act 3 (new snapshot after 3 operations) | ...
    assert renewed == [5]
    assert "## Code Context (as of operation 3)" in prompts[5] and "(as of operation 0)" in prompts[4]
    history = prompts[5].split("## Operation History", 1)[1].split("\n## ", 1)[0]
    assert "### Operation 0" in history and "### Operation 1" not in history  # the bad one left the chain
    assert "- Search with the method's full signature." in prompts[5]


def long_session(steps: int) -> list[str]:
    """Views of a big file, outputs past the observation cap, searches; every seventh action bad, with a lesson."""
    script: list[str] = []
    for step in range(steps - 1):
        start = 1 + (step * 37) % 2400
        thought = f"Step {step}[1](argparse.py:{start})."
        if step % 3 == 0:
            script.append(act(thought, "view", path="argparse.py", start_line=start, end_line=start + 150))
        elif step % 3 == 1:
            script.append(act(thought, "bash", command="seq 1 4000"))
        else:
            script.append(act(thought, "search", pattern=r"def _get_\w+", path="argparse.py"))
        bad = step % 7 == 6
        script.append(reflect(bad, f"Step {step} looked at line {start}.", f"Lesson {step % 40}." if bad else ""))
    script.append(act("Done.", "submit"))
    return script


@pytest.mark.slow
def test_at_step_300_every_prompt_stays_within_its_budget(tmp_path: Path) -> None:
    # the renewal's bounds with the compact snapshot (code context 4,000, 6 history nodes): the bundled one is twice
    # as large, its cost measured on real sessions by scripts/bench_replay.py and on 100 steps by bench_cost.py
    # priced like a gpt model (a re-read at a tenth): a cheaper re-read keeps each epoch longer, its prompts larger
    memory_sizes = {
        "context_budget_chars": 4000,
        "history_max": 6,
        "unpriced": {"input": 1, "cache_read": 0.1, "output": 8},
    }
    settings = load_config("default", environment={"tools": []}, agent={"step_limit": 400}, memory=memory_sizes)
    memory = settings.memory
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n"})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    result = run_task(
        TASK,
        model=write_script(tmp_path / "script.yaml", long_session(300)),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo,
    )
    traj = load_trajectory(result.trajectory_path)
    assert result.exit_status == "submitted" and len(traj["operations"]) == 300
    calls = traj["model_calls"]
    sizes = [c["prompt_chars"] for c in calls]
    assert len(sizes) == 300  # one call per step
    assert max(sizes) <= memory.prompt_budget_chars
    assert "- Lesson 5." in calls[-1]["prompt"]  # an early lesson is still shown
    renewed = [i for i in range(1, len(calls)) if not calls[i]["prompt"].startswith(calls[i - 1]["prompt"])]
    assert len(renewed) >= 20  # the memory is compacted again and again...
    operations = traj["operations"]
    for i in renewed:  # ...each time the prompt had grown past renew_at_chars (its latest output included), and the
        # snapshot is smaller than what it replaces: the prompt before it with the latest operation's turn appended
        latest = len(operations[i - 1]["observation"]) + len(operations[i - 1]["thought"]) + 300
        assert sizes[i] < sizes[i - 1] + latest and sizes[i - 1] + latest > memory.renew_at_chars
    assert min(b - a for a, b in zip(renewed, renewed[1:], strict=False)) >= 2  # a renewal is followed by appends
    assert sum(sizes) / len(sizes) < memory.prompt_budget_chars / 3


def test_the_latest_observation_does_not_repeat_rows_the_code_context_shows(tmp_path: Path) -> None:
    calls = run_session(tmp_path, snapshot_every=1)["model_calls"]
    snapshot = next(c["prompt"] for c in calls if "### Operation 2 (latest)" in c["prompt"])
    context, latest = snapshot.split("### Operation 2 (latest)", 1)
    rows = [line for line in latest.splitlines() if "\t" in line]
    assert "as shown in the Code Context above]" in latest
    assert "    def parse_known_args(" in context and "def parse_known_args(" not in latest
    assert all(row not in context for row in rows)  # what is left of the observation is not shown above


REVIEWS = [
    act("The header[1](argparse.py:1).", "view", path="argparse.py", start_line=1, end_line=40),
    reflect(False, "Imports and the module docstring."),
    act("Again, a part of it[1](argparse.py:20).", "view", path="argparse.py", start_line=18, end_line=30),
    reflect(False, "The same lines."),
    act("Across its end[1](argparse.py:39).", "view", path="argparse.py", start_line=39, end_line=44),
    reflect(False, "Two lines seen, four new."),
    act("Done.", "submit"),
]


def test_a_turn_shows_rows_the_prompt_already_holds_as_one_line(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n"})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    settings = load_config("default", environment={"tools": []})
    result = run_task(TASK, model=write_script(tmp_path / "s.yaml", REVIEWS), settings=settings,
                      output_dir=tmp_path / "out", run_id="t1", repo=repo)  # fmt: skip
    prompts = [c["prompt"] for c in load_trajectory(result.trajectory_path)["model_calls"]]
    assert all(later.startswith(earlier) for earlier, later in zip(prompts, prompts[1:], strict=False))
    rows = ARGPARSE.read_text().splitlines()
    first, second, third = prompts[-1].split("### Operation ")[1:4]
    assert all(f"{n:>6}\t{rows[n - 1]}" in first for n in range(18, 31))
    assert "[lines 18-30: as shown above]" in second and f"    20\t{rows[19]}" not in second
    assert "\n    39\t" in third and "\n    40\t" in third and "\n    44\t" in third  # a run of two is kept
    assert "as shown above" not in first and "as shown above" not in third
