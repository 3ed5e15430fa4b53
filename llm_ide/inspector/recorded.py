"""A trajectory file as every view reads it (`llm-ide inspect`, its `--html` page): its shape checked once where it
enters; a field of the wrong type is refused in one line naming it, what can still be shown is repaired, each repair
said in a line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from llm_ide.errors import UsageError
from llm_ide.run.call_log import PROMPT_KEYS
from llm_ide.run.calls_read import read_log
from llm_ide.terminal import plural


class TrajectoryError(UsageError):
    """A file the inspector cannot read as a trajectory."""


USAGE_KEYS = ("api_calls", "input_tokens", "output_tokens", "cost")
EXPECTED = {"dict_type": "an object", "model_type": "an object", "list_type": "a list", "string_type": "a string"}
EXPECTED |= dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "an integer")
EXPECTED |= dict.fromkeys(("float_type", "float_parsing"), "a number")
EXPECTED |= dict.fromkeys(("bool_type", "bool_parsing"), "true or false")


class Loose(BaseModel):
    """A record as written: keys it does not know kept; null where a default exists is that default."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True, populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields[info.field_name or ""]
        return field.get_default(call_default_factory=True) if value is None and not field.is_required() else value


class Operation(Loose):
    id: int
    parent_id: int | None = None
    attempt: int = 0
    action_type: str = ""
    action_params: dict[str, Any] = {}
    thought: str = ""
    observation: str = ""
    summary: str = ""
    lessons: str = ""
    returncode: int | None = None
    duration: float = 0.0
    candidates: list[dict[str, Any]] = []
    choice: dict[str, Any] = {}


class Call(Loose):
    index: int | None = None  # its position when missing
    kind: str = "?"
    attempt: int = 0
    step: int | None = None
    response: str = ""
    prompt_chars: int = 0
    prompt_tokens: int = 0
    response_tokens: int = 0
    cost: float = 0.0


class Usage(Loose):
    api_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    estimated_calls: int = 0
    discarded_calls: int = 0


class Attempt(Loose):
    index: int
    chosen: bool = False
    score: float | None = None
    exit_status: str = ""
    reasons: str = ""


class Choice(Loose):
    by: str = ""
    attempt: int | None = None
    reasons: str = ""


class Message(Loose):
    sender: str = Field("", alias="from")
    text: str = ""
    step: int = 0


class Info(Loose):
    run_id: str = ""
    exit_status: str = ""
    error: str = ""
    submission: str = ""
    model: str = ""
    calls_log: str = ""
    elapsed: float = 0.0
    model_stats: Usage = Usage()
    attempts: list[Attempt] = []
    choice: Choice = Choice()
    received: list[Message] = []
    config: dict[str, Any] = {}
    navigator: dict[str, Any] | None = None
    reproduction: dict[str, Any] = {}


class Chunk(Loose):
    file_path: str
    lines: list[int] = []
    activity: dict[str, Any] = {}


class Trajectory(Loose):
    operations: list[Operation]
    model_calls: list[Call] = []
    info: Info = Info()
    code_context: list[Chunk] = []
    task: str = ""


def malformed(path: Path, error: Exception) -> TrajectoryError:
    said = str(error).splitlines()[0] if str(error) else repr(error)
    return TrajectoryError(f"{path}: malformed trajectory ({said})")


def refused(path: Path, error: ValidationError) -> TrajectoryError:
    """The first wrong field, named as the file spells it (`model_calls[0].cost`), and what it holds instead."""
    first = error.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    if first["type"] == "missing":
        return TrajectoryError(f"{path}: {where}: missing")
    value, expected = first["input"], EXPECTED.get(first["type"], first["msg"])
    return TrajectoryError(f"{path}: {where}: {expected} expected, not {type(value).__name__} {value!r:.40}")


def read_json(path: Path) -> dict[str, Any]:
    """The file's JSON object (any format), or the one line that says why there is none."""
    if not path.is_file():
        raise TrajectoryError(f"trajectory not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TrajectoryError(f"{path}: not a readable trajectory ({error})") from None
    if not isinstance(data, dict):
        raise TrajectoryError(f"{path}: not a trajectory (a JSON object is expected)")
    return data


def llm_ide_trajectory(data: dict[str, Any], path: Path, prompts: bool) -> tuple[dict[str, Any], list[str]]:
    """An llm-ide trajectory checked and repaired (its calls from the log beside it when it holds none; `prompts`:
    each call's prompt put back from that log), and the repairs said."""
    if not data.get("model_calls") and isinstance(info := data.get("info"), dict) and info.get("calls_log"):
        data = {**data, "model_calls": logged_calls(path.parent / str(info["calls_log"]))}
    notes = [] if data.get("info") is not None else ["no info: the run's outcome, usage unknown"]
    stats = (data.get("info") or {}).get("model_stats") if isinstance(data.get("info"), dict) else None
    if isinstance(stats, dict) and (missing := [key for key in USAGE_KEYS if key not in stats]):
        notes.append(f"info.model_stats has no {', '.join(missing)}: counted as 0")
    try:
        valid = Trajectory.model_validate(data)
    except ValidationError as error:
        raise refused(path, error) from None
    fixed = valid.model_dump(exclude_unset=True, by_alias=True)
    fixed["info"] = {**fixed.get("info", {}), "model_stats": valid.info.model_stats.model_dump()}
    fixed["operations"] = rooted(fixed["operations"], notes)
    fixed["model_calls"] = [
        {**call, "index": n if call.get("index") is None else call["index"], "kind": call.get("kind", "?")}
        for n, call in enumerate(fixed.get("model_calls", []))
    ]
    log = path.parent / valid.info.calls_log if valid.info.calls_log else None
    if log is not None and log.is_file() and valid.info.exit_status and valid.info.model_stats.discarded_calls:
        fixed["discarded_calls"] = discarded_calls(log, fixed["model_calls"], prompts)
    if log is None or not log.is_file() or not (prompts or not valid.info.exit_status):
        return fixed, notes
    logged = {record.get("index"): record for record in logged_calls(log)}
    for call in fixed["model_calls"]:
        call.update({key: value for key, value in logged.get(call["index"], {}).items() if key in PROMPT_KEYS})
    last = max((call["index"] for call in fixed["model_calls"]), default=-1)
    if not valid.info.exit_status and (past := sum(index > last for index in logged)):
        said = "made after it was last written, by a run that did not end (resumed, it writes them)"
        notes.append(f"{log.name} holds {plural(past, 'call')} past the trajectory's last: {said}")
    return fixed, notes


def discarded_calls(log: Path, kept: list[dict[str, Any]], prompts: bool) -> list[dict[str, Any]]:
    """The calls an ended run paid for outside its history (its `discarded_calls`), each with why (`discarded`): a
    call its log holds that a later one of its index replaced (asked again), or made at a step that never completed."""
    records = [record for record in read_log(log)[0] if isinstance(record.get("index"), int)]
    last = {record["index"]: position for position, record in enumerate(records)}
    history = {call["index"] for call in kept}
    out = []
    for position, record in enumerate(records):
        if last[record["index"]] != position:
            cut = record.get("finish_reason") == "cut"
            why = "its reply was cut off mid-way; asked again" if cut else "its step was run again (interrupted)"
        elif record["index"] not in history:
            why = "made at a step that never completed"
        else:
            continue
        try:
            call = Call.model_validate(record).model_dump(exclude_unset=True)
        except ValidationError:  # a record edited by hand: not shown (it is counted in the usage all the same)
            continue
        shown = call if prompts else {key: value for key, value in call.items() if key not in PROMPT_KEYS}
        out.append({**shown, "discarded": why})
    return out


def logged_calls(log: Path) -> list[dict[str, Any]]:
    """The calls a calls log holds, by index (a killed run's trajectory references its log instead of its calls)."""
    if not log.is_file():
        return []
    calls = {record["index"]: record for record in read_log(log)[0] if isinstance(record.get("index"), int)}
    return [calls[index] for index in sorted(calls)]


def rooted(operations: list[dict[str, Any]], notes: list[str]) -> list[dict[str, Any]]:
    """Each operation under a parent of its own attempt that leads to the root; one whose parent is not in the file,
    or whose parents loop back to it, is shown at the root, and said."""
    parents = {(op.get("attempt", 0), op["id"]): op.get("parent_id") for op in operations}
    keys = [(op.get("attempt", 0), op["id"]) for op in operations]
    notes += [f"operation {key[1]} is in the file twice: both shown" for key in parents if keys.count(key) > 1]
    repaired = []
    for op in operations:
        attempt, parent, seen = op.get("attempt", 0), op.get("parent_id"), {op["id"]}
        while parent is not None and (attempt, parent) in parents and parent not in seen:
            seen.add(parent)
            parent = parents[(attempt, parent)]
        if parent is not None:
            why = "is not in the file" if (attempt, parent) not in parents else "loops back to it"
            notes.append(f"operation {op['id']}'s parent {op['parent_id']} {why}: shown at the root")
            op, parents[(attempt, op["id"])] = {**op, "parent_id": None}, None
        repaired.append(op)
    return repaired
