"""The renewal rule prices with the model's own price entry: the prompt grows as full history's would until a renewal
pays under those prices, the memory's bill runs no more than `memory.overspend` above full history's but in the few
calls that pay a renewal back, and the sizes it weighs, taken from the state alone, are those the calls send."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from agent_script import write_script
from conftest import make_git_repo
from hypothesis import given
from hypothesis import strategies as st

from llm_ide.config import load_config
from llm_ide.nodes.render_context import PAYBACK, Ledger, turn_chars
from llm_ide.pricing import PROFILES, Price, settings_of
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.state.operations import node_of

ARGPARSE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"
NEVER = {"renew_at_chars": 10**9, "prompt_budget_chars": 10**9}  # full history: the first snapshot, then every turn
CEILING = 1.05  # issue 36: no session above 1.05 of full history's bill, a renewal's payback calls included


def reply(verdict: str, thought: str, action: str, body: str) -> str:
    return f"{verdict}\n" * bool(verdict) + f"{thought}\n<{action}>{body}</{action}>"


def session(steps: int) -> list[str]:
    """Single-call replies: a view of 120 lines of argparse.py, then a count, in turns."""
    script = []
    for step in range(steps):
        verdict = "good" if step else ""
        if step % 2:
            script.append(reply(verdict, f"Count {step}.", "bash", f"seq {step} 700"))
        else:
            start = 1 + step * 60
            body = f'{{"path": "argparse.py", "start_line": {start}, "end_line": {start + 119}}}'
            script.append(reply(verdict, f"Read from {start}.", "view", body))
    return [*script, reply("good", "Done.", "submit", "")]


def run(tmp_path: Path, name: str, price: Price, steps: int, **memory: object) -> list[dict]:
    """The session's model calls, its scripted model priced `price` (its renewals weigh it)."""
    folder = tmp_path / name
    repo = make_git_repo(folder / "repo", {"README.md": "demo\n"})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    settings = load_config("default", environment={"tools": []}, memory={"unpriced": settings_of(price), **memory})
    result = run_task(
        "Read argparse.py.",
        model=write_script(folder / "script.yaml", session(steps)),
        settings=settings,
        output_dir=folder / "out",
        run_id="t1",
        repo=repo,
    )
    assert result.exit_status == "submitted"
    return load_trajectory(result.trajectory_path)["model_calls"]


def bills(calls: list[dict], price: Price) -> list[float]:
    """The run's bill after each call: the prefix a prompt shares with the one before is a re-read."""
    total, previous, out = 0.0, "", []
    for call in calls:
        prompt = call["prompt"]
        shared = len(os.path.commonprefix([previous, prompt]))
        total += price.bill(len(prompt) - shared, shared, len(call["response"]))
        out.append(total)
        previous = prompt
    return out


def renewals(calls: list[dict]) -> list[int]:
    return [i for i in range(1, len(calls)) if not calls[i]["prompt"].startswith(calls[i - 1]["prompt"])]


@pytest.mark.slow
def test_the_memory_steps_aside_until_it_pays_and_never_costs_more_than_full_history(tmp_path: Path) -> None:
    steps, overspend = 20, 0.03  # the prompts stay under 90% of `prompt_budget_chars`: no renewal is forced
    full = run(tmp_path, "full", PROFILES["gpt"], steps, **NEVER)
    assert renewals(full) == []  # the same run never renewed: every prompt extends the one before
    first: dict[str, int] = {}
    for name, price in PROFILES.items():
        calls = run(tmp_path, name, price, steps, overspend=overspend)
        ours, theirs = bills(calls, price), bills(full, price)
        assert [c["response"] for c in calls] == [c["response"] for c in full]  # the same replies, the same steps
        paying = {i + k for i in renewals(calls) for k in range(PAYBACK)}  # a renewal's calls that pay it back
        assert all(
            a <= (1 + overspend) * b for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if i not in paying
        )
        ending = CEILING if len(calls) - 1 in paying else 1 + overspend  # a run may end before a renewal paid back
        assert ours[-1] <= ending * theirs[-1] and max(a / b for a, b in zip(ours, theirs, strict=True)) < 1.1
        first[name] = (renewals(calls) or [len(calls)])[0]
        if name == "gpt":  # re-reads at a tenth: the memory pays, and by the end it has paid off
            assert first[name] < steps and ours[-1] < 0.9 * theirs[-1]
        assert calls[first[name] - 1]["prompt"] == full[first[name] - 1]["prompt"]  # until then, full history
    assert first["gpt"] < first["open"]  # the cheaper a re-read, the longer the memory steps aside


def test_the_sizes_the_rule_weighs_are_those_the_calls_send(tmp_path: Path) -> None:
    """Within an epoch a prompt is the system part, the snapshot and every operation's turns: the rule's estimate of
    each operation's turns (from its thought, action and output alone) is within a few percent of what is sent."""
    calls = run(tmp_path, "full", PROFILES["gpt"], 8, **NEVER)
    path = next((tmp_path / "full" / "out").rglob("*.traj.json"))
    operations = [node_of(record) for record in load_trajectory(path)["operations"]]
    sizes = [call["prompt_chars"] for call in calls]
    for k in range(1, len(calls)):
        sent = sizes[k] - sizes[k - 1]  # the turns of operation k-1: its reply and its outcome
        estimated = turn_chars(operations[k - 1])
        assert abs(estimated - sent) <= max(40, 0.05 * sent), (k, estimated, sent)


@given(st.lists(st.integers(0, 10**6), max_size=40), st.integers(0, 40), st.floats(0, 1), st.floats(1, 3))
def test_an_epochs_turns_are_charged_a_reread_for_each_call_since_they_were_new(
    turns: list[int], start: int, reread: float, calls: float
) -> None:
    start = min(start, len(turns))
    ledger = Ledger(reread, 8.0, turns, turns, start, 0, 0, 0.0, calls)
    reads = sum(size * (len(turns) - 1 - i) for i, size in enumerate(turns) if i >= start)
    assert ledger.dropped() == reread * calls * reads
