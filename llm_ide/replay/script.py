"""The model side of a replay: llm-ide's calls answered from the trajectory, in the order the agent graph makes them
(step 1: act; every later step: reflect on the previous one, then act; with `agent.single_call` one reply holds
both), every request logged on the wire. Where the actions are tools (`model.action_format: tools`), an act reply is
the text (the verdict, the thought) and the action as a tool call in OpenAI's wire format."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from llm_ide.parsing import body_text
from llm_ide.replay.endpoint import completion, error, prompt_chars, shared_prefix, wire_messages
from llm_ide.replay.formats import Message, Request, Step, written
from llm_ide.text import first_sentence

MODEL = "replay"


@dataclass(frozen=True)
class Reply:
    step: int  # 1-based: the step whose action (or reflection, for `reflect`) the reply holds
    kind: str  # act | reflect
    text: str
    call: dict[str, str] | None = None  # the action as a tool call (name, arguments), where the actions are tools

    @property
    def written(self) -> str:
        """What the model wrote: the text, and the call's name and arguments."""
        return written(self.text, self.call)


@dataclass(frozen=True)
class WireCall:
    index: int
    step: int
    kind: str
    messages: list[Message]
    response: str
    raw: int
    cached: int


def action_text(step: Step, rewrite: Callable[[str], str] | None = None) -> str:
    """The thought, then the action's tag holding its parameters as llm-ide's format asks (a bash command bare)."""
    params = dict(step.params)
    if rewrite is not None and isinstance(params.get("command"), str):
        params["command"] = rewrite(params["command"])
    body = body_text(step.action_type, params) if params or step.action_type != "submit" else ""
    tag = f"<{step.action_type}>{body}</{step.action_type}>"
    return f"{step.thought}\n{tag}" if step.thought.strip() else tag


def brief_verdict(verdict: str, thought: str) -> str:
    """A single-call reply's verdict: without its summary when that is the first sentence of the reasoning after it
    (llm-ide's single-call format asks for the verdict alone, the reasoning beginning with what was found)."""
    head, _, lessons = verdict.partition("\n")
    word, _, summary = head.partition(": ")
    brief = word if summary == first_sentence(thought) else head
    return f"{brief}\n{lessons}" if lessons else brief


def tool_call(step: Step, rewrite: Callable[[str], str] | None = None) -> dict[str, str]:
    """The step's action as a tool call in OpenAI's wire format: its name, its parameters' JSON."""
    params = dict(step.params)
    if rewrite is not None and isinstance(params.get("command"), str):
        params["command"] = rewrite(params["command"])
    return {"name": step.action_type, "arguments": json.dumps(params, ensure_ascii=False)}


def planned_replies(
    steps: list[Step], single_call: bool, rewrite: Callable[[str], str] | None = None, tools: bool = False
) -> list[Reply]:
    """The replies in call order; `tools`: each action as a tool call, the text before it its thought."""
    replies: list[Reply] = []
    for number, step in enumerate(steps, start=1):
        action, call = (step.thought.strip(), tool_call(step, rewrite)) if tools else (action_text(step, rewrite), None)
        if number == 1:
            replies.append(Reply(1, "act", action, call))
        elif single_call:
            verdict = brief_verdict(steps[number - 2].verdict, step.thought)
            text = f"{verdict}\n{action}"
            replies.append(Reply(number, "act", text.strip("\n") if tools else text, call))
        else:
            replies += [Reply(number, "reflect", steps[number - 2].verdict), Reply(number, "act", action, call)]
    return replies


def verbatim(replies: list[Reply], recorded: list[Request]) -> list[Reply]:
    """Our own trajectory's recorded replies in place of the rebuilt ones where the replay makes the calls the original
    made (the same steps in the same order, each action where the original's was: in the text, or a tool call): it is
    then answered word for word as the original was, and both sides' figures are equal."""
    if [r.step for r in recorded] != [r.step for r in replies]:
        return replies
    pairs = list(zip(replies, recorded, strict=True))
    if any((reply.call is None) != (request.call is None) for reply, request in pairs):
        return replies
    if not all(request.response.strip() or request.call for request in recorded):
        return replies
    return [replace(reply, text=request.response, call=request.call) for reply, request in pairs]


class Script:
    """Answers the requests in order; `before_act(step)` runs before the act call of each step is answered (the
    working tree is then as the previous command left it)."""

    def __init__(self, replies: list[Reply], wire: TextIO | None, before_act: Callable[[int], None]) -> None:
        self.replies = replies
        self.wire = wire
        self.before_act = before_act
        self.calls: list[WireCall] = []
        self.previous: list[Message] = []
        self.lock = threading.Lock()

    @classmethod
    def open(
        cls,
        steps: list[Step],
        single_call: bool,
        wire: Path,
        before_act: Callable[[int], None],
        rewrite: Callable[[str], str] | None = None,
        tools: bool = False,
        recorded: list[Request] | None = None,
    ) -> Script:
        """`recorded`: the original's requests, to answer with its own replies where the calls are the same."""
        replies = verbatim(planned_replies(steps, single_call, rewrite, tools), recorded or [])
        return cls(replies, wire.open("w", encoding="utf-8"), before_act)

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = wire_messages(body)
        with self.lock:
            index = len(self.calls)
            if index >= len(self.replies):
                return error(400, f"the trajectory has only {len(self.replies)} replies")
            reply = self.replies[index]
            if reply.kind == "act":
                self.before_act(reply.step)
            raw, cached = prompt_chars(messages), shared_prefix(self.previous, messages)
            self.previous = messages
            call = WireCall(index, reply.step, reply.kind, messages, reply.written, raw, cached)
            self.calls.append(call)
            if self.wire is not None:
                record = {"index": index, "step": reply.step, "kind": reply.kind, "raw": raw, "cached": cached}
                answer = {"response": reply.text, **({"tool_call": reply.call} if reply.call else {})}
                self.wire.write(json.dumps({**record, "request": body, **answer}) + "\n")
                self.wire.flush()
        return 200, completion(str(body.get("model") or MODEL), reply.text, index, raw, cached, reply.call)
