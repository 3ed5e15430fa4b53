"""The scripted model (`--model scripted:FILE.yaml`): a YAML list of replies, one per model call, for tests, demos and
dry runs."""

from __future__ import annotations

import threading
from pathlib import Path

import yaml

from llm_ide.calls import CallListener, Message, ModelReply, estimate_tokens, observed
from llm_ide.errors import ModelError
from llm_ide.text import clean_text


class ScriptedModel:
    """Replays a YAML list of raw responses, one per call, in order; it keeps its own position (`resume` puts a resumed
    run's model where its checkpoint left it). An item may choose by the prompt: `{if_prompt_contains: TEXT, then:
    RESPONSE, else: RESPONSE}`."""

    concurrent = False  # it answers at once: several calls go one after the other, so the order is the script's

    def __init__(self, path: Path, responses: list[ScriptItem] | None = None) -> None:
        self.path = path
        self.name = f"scripted:{path}"
        self.responses = load_script(path) if responses is None else responses
        self.listener: CallListener | None = None  # told of each call (a live status)
        self.position = 0
        self._lock = threading.Lock()

    def resume(self, calls: int) -> None:
        """The calls this model had answered when the run was checkpointed: the script goes on from there."""
        self.position = calls

    def complete(self, messages: list[Message], deadline: float | None = None) -> ModelReply:
        with observed(self.listener, self.name, messages) as call:
            with self._lock:
                position, self.position = self.position, self.position + 1
            if position >= len(self.responses):
                raise ModelError(f"scripted model ran out of responses after {len(self.responses)} calls ({self.path})")
            prompt = "".join(message["content"] for message in messages)
            text = clean_text(choose(self.responses[position], prompt))  # YAML escapes can carry lone surrogates
            call.text(text)  # all at once: -v shows it as it would a streamed reply
            call.replied(estimate_tokens(prompt), estimate_tokens(text))
        return ModelReply(text, call.prompt_tokens, call.output_tokens, cost=0.0, estimated=True)


ScriptItem = str | dict[str, str]
CHOICE_KEYS = {"if_prompt_contains", "then", "else"}


def choose(item: ScriptItem, prompt: str) -> str:
    if isinstance(item, str):
        return item
    return item["then"] if item["if_prompt_contains"] in prompt else item["else"]


def valid_item(item: object) -> bool:
    if isinstance(item, dict):
        return set(item) == CHOICE_KEYS and all(isinstance(value, str) for value in item.values())
    return isinstance(item, str)


def load_script(path: Path) -> list[ScriptItem]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
            f"scripted model: {path} must hold a list of strings or {{if_prompt_contains, then, else}} choices "
            "(or a mapping with a `responses:` list)"
        )
    return responses
