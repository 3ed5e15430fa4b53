"""The scripted model (`--model scripted:FILE.yaml`): a YAML list of replies, one per model call, for tests, demos and
dry runs. A reply is a text, or a tool call with the text before it (`{text: …, tool_call: {name: view, arguments:
{path: a.py}}}`, for a run whose actions are tools), or a choice between two by the prompt."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml

from llm_ide.calls import CallListener, Message, ModelReply, estimate_tokens, observed
from llm_ide.errors import ModelError
from llm_ide.settings import load_yaml
from llm_ide.text import clean_text
from llm_ide.tool_calls import ToolCall, arguments_text, recorded, text_of


class ScriptedModel:
    """Replays a YAML list of raw responses, one per call, in order; it keeps its own position (`resume` puts a resumed
    run's model where its checkpoint left it). An item may choose by the prompt: `{if_prompt_contains: TEXT, then:
    RESPONSE, else: RESPONSE}`."""

    concurrent = False  # it answers at once: several calls go one after the other, so the order is the script's

    def __init__(self, path: Path, responses: list[ScriptItem] | None = None, action_format: str = "text") -> None:
        self.path = path
        self.name = f"scripted:{path}"
        self.responses = load_script(path) if responses is None else responses
        self.action_format = action_format  # "tools": the run gives it the actions as tools (its script says the rest)
        self.listener: CallListener | None = None  # told of each call (a live status)
        self.position = 0
        self._lock = threading.Lock()

    def resume(self, calls: int) -> None:
        """The calls this model had answered when the run was checkpointed: the script goes on from there."""
        self.position = calls

    def with_responses(self, responses: list[ScriptItem]) -> ScriptedModel:
        return ScriptedModel(self.path, responses, self.action_format)

    def complete(
        self, messages: list[Message], deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> ModelReply:
        prompt = text_of(messages)
        with observed(self.listener, self.name, estimate_tokens(prompt)) as call:
            with self._lock:
                position, self.position = self.position, self.position + 1
            if position >= len(self.responses):
                raise ModelError(f"scripted model ran out of responses after {len(self.responses)} calls ({self.path})")
            text = clean_text(choose(self.responses[position], prompt))  # YAML escapes can carry lone surrogates
            call.text(text)  # all at once: -v shows it as it would a streamed reply
            call.replied(estimate_tokens(prompt), estimate_tokens(text))
        return ModelReply(text, call.prompt_tokens, call.output_tokens, cost=0.0, estimated=True)


ScriptItem = str | dict[str, Any]
CHOICE_KEYS = {"if_prompt_contains", "then", "else"}


def choose(item: ScriptItem, prompt: str) -> str:
    """The reply an item gives to `prompt` (a tool call in its recorded form: llm_ide/tool_calls.py)."""
    if isinstance(item, str):
        return item
    if "tool_call" in item:
        call = item["tool_call"]
        return recorded(item.get("text", ""), [ToolCall(call["name"], arguments_text(call.get("arguments") or {}))])
    return choose(item["then"] if item["if_prompt_contains"] in prompt else item["else"], prompt)


def valid_reply(item: object) -> bool:
    """A text, or a tool call (its name, its arguments as a mapping or a JSON text) with the text before it."""
    if not isinstance(item, dict):
        return isinstance(item, str)
    call = item.get("tool_call")
    return (
        set(item) <= {"text", "tool_call"}
        and isinstance(item.get("text", ""), str)
        and isinstance(call, dict)
        and set(call) <= {"name", "arguments"}
        and isinstance(call.get("name"), str)
        and isinstance(call.get("arguments", {}), dict | str)
    )


def valid_item(item: object) -> bool:
    if isinstance(item, dict) and "if_prompt_contains" in item:
        return (
            set(item) == CHOICE_KEYS
            and isinstance(item["if_prompt_contains"], str)
            and all(valid_reply(item[key]) for key in ("then", "else"))
        )
    return valid_reply(item)


def load_script(path: Path) -> list[ScriptItem]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), yaml.SafeLoader)
    except FileNotFoundError:
        raise ModelError(f"scripted model: file not found: {path}") from None
    except IsADirectoryError:
        raise ModelError(f"scripted model: {path} is a directory: give a YAML file of replies") from None
    except PermissionError:
        raise ModelError(f"scripted model: {path} cannot be read (permission denied)") from None
    except UnicodeDecodeError as error:
        raise ModelError(f"scripted model: {path} is not UTF-8 text (byte {error.start}: {error.reason})") from None
    except yaml.YAMLError as error:
        raise ModelError(f"scripted model: {path} is not valid YAML: {' '.join(str(error).split())}") from None
    responses = data.get("responses") if isinstance(data, dict) else data
    if not isinstance(responses, list) or not all(valid_item(item) for item in responses):
        raise ModelError(
            f"scripted model: {path} must hold a list of strings, {{text, tool_call: {{name, arguments}}}} tool calls "
            "or {if_prompt_contains, then, else} choices (or a mapping with a `responses:` list)"
        )
    return responses
