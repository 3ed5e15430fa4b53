"""The scripted model (`--model scripted:FILE.yaml`): a YAML list of replies, one per model call, for tests, demos and
dry runs. A reply is a text, or a tool call with the text before it (`{text: …, tool_call: {name: view, arguments:
{path: a.py}}}`, answered as the provider would: the call as data), or a choice between two by the prompt.

It is an ordinary chat model that keeps its own place in its script: given the run's keep (llm_ide/keep.py), it
writes there a line per call it answered (the prompt's digest), so that the run resumed in another process, or on
another machine, goes on where it was; a call made again after a resume (the step a kill interrupted runs again, with
the same prompt) gets the reply it had."""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any

from llm_ide.calls import CallListener, Message, ModelReply, ToolCall, estimate_tokens, message_text, observed
from llm_ide.errors import ModelError
from llm_ide.keep import Keep
from llm_ide.script_file import ScriptItem, calls_a_tool, joined_script, load_script
from llm_ide.terminal import plural
from llm_ide.text import clean_text


class Place:
    """Where a scripted model is in its script: the digests of the prompts it answered, in order (in its keep when it
    has one). The first call after it is made, when its prompt is one answered before (the last such run of equal
    prompts: a step's k samples), goes back there: the calls from there on are made again."""

    def __init__(self, keep: Keep | None, name: str) -> None:
        self.keep, self.name = keep, name
        self.digests = keep.lines(name) if keep is not None else []
        self.resumed = bool(self.digests)

    def find(self, digest: str) -> int:
        """The position of a call whose prompt has `digest`."""
        if not self.resumed or digest not in self.digests:
            return len(self.digests)
        at = len(self.digests) - 1 - self.digests[::-1].index(digest)
        while at and self.digests[at - 1] == digest:
            at -= 1
        return at

    def take(self, position: int, digest: str) -> None:
        """The call at `position` answered (the calls after it, if any, are to be made again)."""
        cut = position < len(self.digests)
        self.digests, self.resumed = [*self.digests[:position], digest], False
        if self.keep is not None:
            self.keep.write(self.name, self.digests if cut else [digest], append=not cut)


class ScriptedModel:
    """Replays a YAML list of raw responses, one per call, in order. An item may choose by the prompt:
    `{if_prompt_contains: TEXT, then: RESPONSE, else: RESPONSE}`."""

    concurrent = False  # it answers at once: several calls go one after the other, so the order is the script's
    takes_tools = True  # its items say whether a reply calls a tool

    def __init__(self, path: Path, keep: Keep | None = None, responses: list[ScriptItem] | None = None) -> None:
        self.path, self.keep = path, keep
        self.name = f"scripted:{path}"
        self.responses = load_script(path) if responses is None else responses
        self.tools_by_default = any(map(calls_a_tool, self.responses))  # `auto`: tools where its items make calls
        self.listener: CallListener | None = None  # told of each call (a live status)
        stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem)[:40]
        self.place = Place(keep, f"scripted-{stem}-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}.place")
        self._lock = threading.Lock()

    def joined(self) -> ScriptedModel:
        """The model for a run of one call per step: a script written for two calls per step plays in it, each reply
        that is only a verdict joined to the reply after it."""
        return ScriptedModel(self.path, self.keep, joined_script(self.responses))

    def complete(
        self, messages: list[Message], deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> ModelReply:
        prompt = "".join(message_text(message) for message in messages)
        with observed(self.listener, self.name, estimate_tokens(prompt)) as call:
            digest = hashlib.sha1(prompt.encode("utf-8", "surrogatepass")).hexdigest()
            with self._lock:
                position = self.place.find(digest)
                if position >= len(self.responses):
                    raise ModelError(
                        f"scripted model ran out of responses after {plural(len(self.responses), 'call')} ({self.path})"
                    )
                self.place.take(position, digest)
            text, calls = choose(self.responses[position], prompt)
            call.text(text)  # all at once: -v shows it as it would a streamed reply
            written = text + "".join(c.name + c.arguments for c in calls)
            call.replied(estimate_tokens(prompt), estimate_tokens(written))
        return ModelReply(text, call.prompt_tokens, call.output_tokens, cost=0.0, estimated=True, tool_calls=calls)


def choose(item: ScriptItem, prompt: str) -> tuple[str, tuple[ToolCall, ...]]:
    """The reply an item gives to `prompt`: its text (YAML escapes can carry lone surrogates: cleaned) and its calls."""
    if isinstance(item, str):
        return clean_text(item), ()
    if "tool_call" in item:
        call = item["tool_call"]
        made = ToolCall.of(call["name"], call.get("arguments") or {}, "call_scripted")
        return clean_text(item.get("text", "")), (made,)
    return choose(item["then"] if item["if_prompt_contains"] in prompt else item["else"], prompt)
