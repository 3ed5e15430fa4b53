"""Trajectories read as what a replay needs: each step's thought and action, the original's observation, the reply
that judges the step (the reflect call's), and the original run's requests (to price them as llm-ide's are)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import regex

from llm_ide.errors import UsageError
from llm_ide.fileio import file_name_problem
from llm_ide.inspector.load import MINI_FORMAT, content_text
from llm_ide.patterns import BoundedPattern
from llm_ide.run.trajectory import FORMAT as LLM_IDE_FORMAT
from llm_ide.run.trajectory import load_trajectory
from llm_ide.settings import MAX_SECONDS
from llm_ide.text import first_sentence

FORMATS = (MINI_FORMAT, LLM_IDE_FORMAT)
MINI_ACTION = r"```bash\s*\n(.*?)\n```"  # mini-swe-agent 1.x's default action_regex
MINI_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
PR_DESCRIPTION = re.compile(
    r"<pr_description>\s*(?:Consider the following PR description:\n)?(.*?)\s*</pr_description>", re.S
)
RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
PROMPT_PART = re.compile(r"(?:^|\n\n)\[(system|user|assistant)\]\n")

Message = dict[str, str]


class ReplayError(UsageError):
    """A replay that cannot start: an unreadable trajectory, a repository without the commit (one line, exit 2)."""


@dataclass(frozen=True)
class Step:
    thought: str
    action_type: str
    params: dict[str, Any]
    observation: str  # the original's
    verdict: str = ""  # the reflection on this step, as the next reflect call answers it
    returncode: int | None = None  # the original's


def written(text: str, call: dict[str, str] | None) -> str:
    """A reply's text, then its tool call's name and arguments on a line of their own: what the model wrote."""
    return text + (f"\n{call['name']} {call['arguments']}" if call else "")


@dataclass(frozen=True)
class Request:
    """One request of the original run: its messages and the reply; `step` is the step (1-based) whose action the
    reply holds, or tried to (a reply without a usable action counts with the step that follows)."""

    step: int
    messages: list[Message]
    response: str
    call: dict[str, str] | None = None  # the reply's first tool call (its name, its arguments), where it made one

    @property
    def written(self) -> str:
        """What the model wrote: the text, and the call's name and arguments (as a replay's reply counts them)."""
        return written(self.response, self.call)


@dataclass
class Trajectory:
    format: str
    task: str
    steps: list[Step]
    requests: list[Request]
    fixed_text: str  # the original's system and instance text: a token found there is no reference
    instance_id: str | None = None
    submission: str = ""
    command_timeout: float | None = None
    workdir: str | None = None  # where the original's commands ran, when it is a fixed path (/testbed)
    observation_template: str = ""  # how the original rendered a command's output and return code (Jinja2)
    observed: dict[int, int] = field(default_factory=dict)  # a request message's position → the step (0-based) it shows
    action_format: str | None = None  # ours: tools where the replies made tool calls, else text


def load(path: Path) -> Trajectory:
    """The trajectory at `path` in any of FORMATS; anything else is a ReplayError."""
    try:
        data = load_trajectory(path) if path.name.endswith(".traj.json") else json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReplayError(f"{path}: not a readable trajectory ({error})") from None
    kind = detect(data)
    if kind is None:
        raise ReplayError(f"{path}: not a trajectory of a known format ({', '.join(FORMATS)})")
    try:
        trajectory = mini_trajectory(data) if kind == MINI_FORMAT else llm_ide_trajectory(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ReplayError(f"{path}: a malformed {kind} trajectory ({error})") from None
    if not trajectory.steps:
        raise ReplayError(f"{path}: the trajectory has no action to replay")
    return trajectory


def run_id_of(trajectory: Trajectory, path: Path) -> str:
    """The replay's run id: the trajectory's instance, else its file's name, as a file name."""
    name = trajectory.instance_id or path.name.removesuffix(".json").removesuffix(".traj")
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip(".-_") or "replay"


def detect(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if data.get("trajectory_format") == MINI_FORMAT:
        return MINI_FORMAT
    if data.get("format") == LLM_IDE_FORMAT and isinstance(data.get("operations"), list):
        return LLM_IDE_FORMAT
    return None


def verdict_of(next_thought: str) -> str:
    return f"good: {first_sentence(next_thought) or 'done.'}"


def mini_trajectory(data: dict[str, Any]) -> Trajectory:
    """mini-swe-agent 1.x: an assistant message with exactly one bash block is a step (the next user message its
    observation); one without is a format error, its request counted with the next step's; the echo of
    COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT is the submit."""
    info = data.get("info") or {}
    config = info.get("config") or {}
    action = (config.get("agent") or {}).get("action_regex") or MINI_ACTION
    pattern = BoundedPattern(str(action), regex.S, what="its action_regex")
    messages = [{"role": str(m["role"]), "content": content_text(m)} for m in data["messages"]]
    instance = next((m["content"] for m in messages if m["role"] == "user"), "")
    found = PR_DESCRIPTION.search(instance)
    raw_steps: list[tuple[str, str, dict[str, Any], str]] = []
    requests: list[Request] = []
    observed: dict[int, int] = {}
    for position, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        requests.append(Request(len(raw_steps) + 1, messages[:position], message["content"]))
        blocks = pattern.finditer(message["content"])
        if len(blocks) != 1:
            continue
        block, text = blocks[0], message["content"]
        thought = (text[: block.start()] + text[block.end() :]).strip()
        thought = re.sub(r"^THOUGHT:\s*", "", thought, flags=re.I)
        command = block.group(1)
        following = messages[position + 1] if position + 1 < len(messages) else {"role": "", "content": ""}
        observation = following["content"] if following["role"] == "user" else ""
        if following["role"] == "user":
            observed[position + 1] = len(raw_steps)
        if command.strip().startswith(f"echo {MINI_SUBMIT}"):
            raw_steps.append((thought, "submit", {}, observation))
            break
        raw_steps.append((thought, "bash", {"command": command}, observation))
    steps = [
        Step(
            thought,
            kind,
            params,
            observation,
            verdict_of(raw_steps[i + 1][0]) if i + 1 < len(raw_steps) else "",
            int(code.group(1)) if (code := RETURNCODE.match(observation)) else None,
        )
        for i, (thought, kind, params, observation) in enumerate(raw_steps)
    ]
    fixed = "\n".join(m["content"] for m in messages[:2] if m["role"] in ("system", "user"))
    timeout = seconds((config.get("environment") or {}).get("timeout"))
    return Trajectory(
        format=MINI_FORMAT,
        task=found.group(1) if found else instance,
        steps=steps,
        requests=[request for request in requests if request.step <= len(steps)],
        fixed_text=fixed,
        instance_id=name_or_none(data.get("instance_id")),
        submission=str(info.get("submission") or ""),
        command_timeout=timeout,
        workdir=absolute((config.get("environment") or {}).get("cwd") or "/testbed"),
        observation_template=str((config.get("agent") or {}).get("action_observation_template") or ""),
        observed=observed,
    )


def llm_ide_trajectory(data: dict[str, Any]) -> Trajectory:
    """Ours: every operation in the order it ran, its recorded reflection as the verdict; the requests from the calls
    log (their prompts flattened as `[role]` parts, split again)."""
    info = data.get("info") or {}
    operations = sorted(data["operations"], key=lambda op: op["id"])
    steps = [
        Step(
            thought=str(op.get("thought") or ""),
            action_type=str(op["action_type"]),
            params=dict(op.get("action_params") or {}),
            observation=str(op.get("observation") or ""),
            verdict=reflection_text(op),
            returncode=op.get("returncode"),
        )
        for op in operations
    ]
    calls = [call for call in data.get("model_calls") or [] if call.get("prompt")]
    requests = [
        Request(
            int(call.get("step") or 0) + 1,
            split_prompt(str(call["prompt"])),
            str(call.get("response") or ""),
            first_call(call.get("tool_calls")),
        )
        for call in calls
    ]
    system = next((r.messages[0]["content"] for r in requests if r.messages and r.messages[0]["role"] == "system"), "")
    environment = (info.get("config") or {}).get("environment") or {}
    run_id = str(info.get("run_id") or "")  # a SWE-bench batch names its runs after the instances
    return Trajectory(
        format=LLM_IDE_FORMAT,
        task=str(data.get("task") or ""),
        steps=steps,
        requests=requests,
        fixed_text=system or str(data.get("task") or ""),
        instance_id=name_or_none(run_id) if "__" in run_id else None,
        submission=str(info.get("submission") or ""),
        command_timeout=seconds(environment.get("command_timeout")),
        workdir=absolute(
            environment.get("mount_at") or (environment.get("workdir") if environment.get("type") == "docker" else None)
        ),
        action_format=("tools" if any(r.call for r in requests) else "text") if requests else None,
    )


def first_call(calls: Any) -> dict[str, str] | None:
    """A recorded reply's first tool call as the replay answers it: its name and its arguments' text."""
    if not calls:
        return None
    return {"name": str(calls[0]["name"]), "arguments": str(calls[0]["arguments"])}


def name_or_none(value: Any) -> str | None:
    """An instance id that can name a branch and the replay's folder; anything else is no id."""
    return value if isinstance(value, str) and file_name_problem(value) is None else None


def seconds(value: Any) -> float | None:
    """The original's command timeout: a number of seconds up to MAX_SECONDS, else the trajectory is refused."""
    if value is None or value == "" or value == 0:
        return None
    try:
        found = float(value)
    except (TypeError, ValueError):
        found = math.nan
    if not 0 < found <= MAX_SECONDS:
        raise ValueError(f"its command timeout {str(value)[:40]} is not a number of seconds up to {MAX_SECONDS}")
    return found


def absolute(value: Any) -> str | None:
    """Where the original's commands ran: an absolute path of plain names (it is rewritten in commands and becomes
    the sandbox's mount point), else the trajectory is refused."""
    if value is None or value == "":
        return None
    path = PurePosixPath(str(value))
    if not path.is_absolute() or ".." in path.parts or len(str(value)) > 200 or "\0" in str(value):
        raise ValueError(f"its working directory {str(value)[:80]!r} is not an absolute path")
    return str(path)


def reflection_text(op: dict[str, Any]) -> str:
    if op.get("bad_action") is None:
        return ""
    lessons = [f"\nlesson: {line.strip()}" for line in str(op.get("lessons") or "").splitlines() if line.strip()]
    summary = " ".join(str(op.get("summary") or "").split()) or "done."
    return f"{'bad' if op['bad_action'] else 'good'}: {summary}{''.join(lessons)}"


def split_prompt(prompt: str) -> list[Message]:
    """A recorded prompt (`[role]\\ncontent` parts joined by blank lines) as messages again."""
    marks = list(PROMPT_PART.finditer(prompt))
    return [
        {"role": mark.group(1), "content": prompt[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else None]}
        for i, mark in enumerate(marks)
    ]
