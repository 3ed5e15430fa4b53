"""The figures bench_session.py reads off a played session's trajectory: prompt sizes per operation, against a
full-history (mini-swe-agent-style) agent's, the machinery time per step, and the anchor of real mini-swe-agent
trajectories."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any

from bench_session_script import MINI_TRUNCATE, MINI_WARNING_CHARS, TRAJECTORIES

from llm_ide.prompting import render


@dataclass
class Session:
    steps: int
    traj: dict[str, Any]
    step_times: dict[int, float]
    sizes: dict[int, tuple[int, int, int, int]]  # step → (db, WAL, latest checkpoint, trajectory JSON) bytes
    exit_status: str
    seconds: float


def model_seconds_per_step(calls: list[dict[str, Any]]) -> dict[int, float]:
    """Each call belongs to the operation whose `act` call it precedes (reflections included)."""
    per_step: dict[int, float] = {}
    acts = 0
    for call in calls:
        step = acts + 1
        per_step[step] = per_step.get(step, 0.0) + call["seconds"]
        acts += call["kind"] == "act"
    return per_step


def machinery_ms(session: Session) -> tuple[dict[int, float], dict[int, float]]:
    """Per step from 2 on: (wall − model − action duration, wall − model − command duration) in milliseconds."""
    model = model_seconds_per_step(session.traj["model_calls"])
    operations = session.traj["operations"]
    strict, in_process = {}, {}
    for step in range(2, len(operations) + 1):
        if step not in session.step_times or step - 1 not in session.step_times:
            continue
        wall = session.step_times[step] - session.step_times[step - 1]
        op = operations[step - 1]
        command = op["duration"] if op["action_type"] in ("bash", "search") else 0.0
        strict[step] = (wall - model.get(step, 0.0) - op["duration"]) * 1000
        in_process[step] = (wall - model.get(step, 0.0) - command) * 1000
    return strict, in_process


def last_act_prompts(calls: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, int]]:
    """Per operation: the prompt size of its (last) act call, and of all its calls (reflect + act + retries)."""
    act_chars: dict[int, int] = {}
    all_chars: dict[int, int] = {}
    acts = 0
    for call in calls:
        step = acts + 1
        all_chars[step] = all_chars.get(step, 0) + call["prompt_chars"]
        if call["kind"] == "act":
            act_chars[step] = call["prompt_chars"]
            acts += 1
    return act_chars, all_chars


def ours_act_prompt(traj: dict[str, Any], step: int) -> str:
    return [call for call in traj["model_calls"] if call["kind"] == "act"][step - 1]["prompt"]


def shape(thoughts: list[int], observations: list[int]) -> str:
    return (
        f"thought median {statistics.median(thoughts):.0f} chars (mean {statistics.mean(thoughts):.0f}), "
        f"observation median {statistics.median(observations):.0f} chars (mean {statistics.mean(observations):.0f})"
    )


def mini_observation_chars(observation: str, returncode: int | None) -> int:
    head = f"<returncode>{returncode}</returncode>\n"
    if len(observation) < MINI_TRUNCATE:
        return len(head) + len("<output>\n</output>") + len(observation)
    elided = f"<elided_chars>\n{len(observation) - MINI_TRUNCATE} characters elided\n</elided_chars>"
    tags = len("<output_head>\n</output_head>\n<output_tail>\n</output_tail>")
    return len(head) + MINI_WARNING_CHARS + tags + len(elided) + MINI_TRUNCATE


def calls_to(calls: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """The calls up to operation `step`'s (last) act call, reflections and retries included."""
    acts = [index for index, call in enumerate(calls) if call["kind"] == "act"]
    return calls[: acts[step - 1] + 1] if len(acts) >= step else calls


def full_history_chars(traj: dict[str, Any], templates: dict[str, Any]) -> dict[int, int]:
    """The prompt a full-history agent sends for operation k: system + task + (action, observation) of ops 1..k−1."""
    blank = dict.fromkeys(("actions", "reflect_format", "act_format", "single_format", "task", "tool_usage"), "")
    fixed = len(render(templates, "system", single=False, additions="", **blank))
    fixed += len(render(templates, "task", task=traj["task"]))
    acts = [call["response"] for call in traj["model_calls"] if call["kind"] == "act"]
    sizes, total = {}, fixed
    for step, (op, response) in enumerate(zip(traj["operations"], acts, strict=False), start=1):
        sizes[step] = total
        total += len(response) + mini_observation_chars(op["observation"], op["returncode"])
    return sizes


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def real_anchor() -> tuple[list[tuple[str, int, int]], list[int], list[int]]:
    """Of the real mini-swe-agent trajectories: (instance, model calls, characters of all messages) each, and the
    lengths of all thoughts (assistant text before the command block) and of all observations."""
    rows, thoughts, observations = [], [], []
    for path in sorted(TRAJECTORIES.glob("*.traj.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data.get("messages") or []
        calls = sum(1 for m in messages if m.get("role") == "assistant")
        rows.append((data.get("instance_id") or path.name, calls, sum(len(text_of(m)) for m in messages)))
        thoughts += [len(text_of(m).split("```")[0]) for m in messages if m.get("role") == "assistant"]
        observations += [len(text_of(m)) for m in messages[2:] if m.get("role") == "user"]
    return rows, thoughts, observations


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def prompt_sections(prompt: str) -> dict[str, int]:
    """Characters per `## ` section of a prompt (the workspace template's headings), the rest as `other`."""
    sections: dict[str, int] = {}
    for index, part in enumerate(prompt.split("\n## ")):
        title = "other" if index == 0 else part.split("\n", 1)[0].strip()
        sections[title] = sections.get(title, 0) + len(part)
    return sections
