"""The exchange of a run's steps with its model, chosen once per run (`exchange_for`): one call per step (its reply
carries the verdict on the latest operation and the next action) or two (a reflection, then an action), × the actions
in the reply's text (llm_ide/parsing.py) or as the provider's tools (llm_ide/action_tools.py). It gives what depends
on that choice: the templates, the tools a request carries, an operation's turns in the conversation, a rejected
reply's turns, and how each reply is read. Nothing else reads `agent.single_call` or `model.action_format`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from llm_ide import action_tools, verdict
from llm_ide.calls import Message, Model, ModelReply, ToolCall
from llm_ide.errors import FormatError, ModelError
from llm_ide.parsing import Grammar, ParsedAction, parse_action
from llm_ide.settings import CoreSettings, Templates
from llm_ide.state.operations import OperationNode
from llm_ide.verdict import Verdict

PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]{0,60}>")
TAGS_NOT_TOOLS = "; the reply's tool call `{}` is no action here: the run's actions are tags, not tools (action_format)"


@dataclass(frozen=True)
class Offer:
    """What a request offered the model: the actions the run reads (`grammar`), the tools it gave (None: the actions
    are in the text), and its system prompt (a placeholder of its action list, copied as a value, is refused)."""

    grammar: Grammar
    tools: list[dict[str, Any]] | None
    prompt: str


@dataclass(frozen=True)
class Reading:
    """What a reply gave: the verdict on the latest operation, the next action, or both (one call per step)."""

    verdict: Verdict | None = None
    action: ParsedAction | None = None


class TextForm:
    """The actions in the reply's text: a tag named after the action holding its JSON parameters."""

    def templates(self, settings: CoreSettings) -> Templates:
        return settings.templates

    def tools(self, schemas: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]] | None:
        return None

    def action_lines(self, lines: list[str]) -> list[str]:
        """The variants' entries of the action list (where the actions are tools, the tools say it all)."""
        return [line for line in lines if line]

    def action(self, reply: ModelReply, offer: Offer) -> ParsedAction:
        try:
            return parse_action(reply.text, offer.grammar)
        except FormatError as error:  # a tool call (a script's) said to be none: the actions are tags here
            said = "".join(TAGS_NOT_TOOLS.format(call.name) for call in reply.tool_calls[:1])
            raise FormatError(f"{error}{said}") from None

    def reply_message(self, text: str, node: OperationNode) -> Message:
        return {"role": "assistant", "content": text}

    def outcome(self, node: OperationNode, text: str, instruction: str) -> list[Message]:
        return [{"role": "user", "content": text}]

    def rejected(self, retry: dict[str, Any]) -> list[Message]:
        text = retry.get("text", retry.get("response", ""))
        return [{"role": "assistant", "content": text}, {"role": "user", "content": retry["message"]}]


class ToolForm(TextForm):
    """The actions as the provider's tools: the reply's text is the verdict and the reasoning, its first call the
    action; an operation is the assistant's message with its call, and the call's result."""

    def templates(self, settings: CoreSettings) -> Templates:
        return settings.templates.with_tools

    def tools(self, schemas: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]] | None:
        return [action_tools.tool(name, schema, values) for name, schema in schemas.items()]

    def action_lines(self, lines: list[str]) -> list[str]:
        return []

    def action(self, reply: ModelReply, offer: Offer) -> ParsedAction:
        return action_tools.tool_action(reply, offer.grammar, offer.tools)

    def reply_message(self, text: str, node: OperationNode) -> Message:
        return action_tools.tool_reply(text, node)

    def outcome(self, node: OperationNode, text: str, instruction: str) -> list[Message]:
        return action_tools.tool_outcome(node, text, instruction)

    def rejected(self, retry: dict[str, Any]) -> list[Message]:
        calls = [ToolCall(c["name"], c["arguments"], c.get("id", "")) for c in retry.get("tool_calls") or []]
        if not calls:
            return super().rejected(retry)
        return action_tools.rejected_turns(retry["text"], calls, retry["message"])


TEXT, TOOLS = TextForm(), ToolForm()


@dataclass(frozen=True)
class Exchange:
    """One of the four ways a run's steps talk to its model: `one_call` × `form`."""

    one_call: bool
    form: TextForm

    @property
    def reflect_kind(self) -> str:
        """The kind of the reflection's call: one call per step, the step's act call that judges first."""
        return "act" if self.one_call else "reflect"

    @property
    def verdict_instruction(self) -> str:
        """The template asking for the verdict after an operation's outcome."""
        return "single_step" if self.one_call else "reflect"

    def templates(self, settings: CoreSettings) -> Templates:
        return self.form.templates(settings)

    def expected(self, node: str) -> str:
        """The template of the format a rejected reply of `node` (reflect, act) is asked again in."""
        if node == "act":
            return "act_format"
        return "single_format" if self.one_call else "reflect_format"

    def read_verdict(self, reply: ModelReply, offer: Offer) -> Reading:
        """The reflection's reply: the verdict, and with one call per step the action after it (whose reasoning's
        first sentence is the verdict's summary when the verdict line has none)."""
        if not self.one_call:
            return Reading(verdict.parse(reply.text))
        if offer.tools is not None:
            self.form.action(reply, offer)  # a missing or unknown call is said first
        said, rest = verdict.split(reply.text)
        found = verdict.parse(said)
        action = self.action(replace(reply, text=rest), offer)
        return Reading(found.summarised(action.thought), action)

    def read_action(self, reply: ModelReply, offer: Offer) -> Reading:
        return Reading(action=self.action(reply, offer))

    def action(self, reply: ModelReply, offer: Offer) -> ParsedAction:
        """The reply's action; a placeholder of the prompt's action list copied into it is refused, saying so."""
        marks = placeholders(offer.prompt, offer.grammar.types)
        try:
            action = self.form.action(reply, offer)
        except FormatError as error:  # a placeholder in the JSON breaks it (`"start_line": <int>`)
            written = [reply.text, *(call.arguments for call in reply.tool_calls)]
            copied = next((mark for mark in sorted(marks) if any(mark in text for text in written)), None)
            if copied is None or "not valid JSON" not in str(error):
                raise
            raise FormatError(
                f"{error}; it holds {copied}, a placeholder of the action list: write the real value"
            ) from None
        for key, value in action.action_params.items():
            if isinstance(value, str) and value.strip() in marks:
                raise FormatError(f"`{key}` is {value.strip()}, a placeholder of the action list: write the real value")
        return action

    def prepare(self, model: Model) -> Model:
        """The agent's model for this exchange: a model that joins separate verdict and action replies (a scripted
        model whose script was written for two calls per step) does so for one call per step."""
        joined = getattr(model, "joined", None)
        return joined() if self.one_call and joined is not None else model


def tools_asked(settings: CoreSettings) -> bool:
    """Whether the actions are to be tools whatever the model (`model.action_format: tools`)."""
    return settings.model.action_format == "tools"


def exchange_for(settings: CoreSettings, model: Model) -> Exchange:
    """The run's exchange: `agent.single_call`, and `model.action_format` (`auto`: tools for a model that takes them
    by default, a provider's own API; text for any other)."""
    wanted = settings.model.action_format
    if wanted == "tools" and not model.takes_tools:
        raise ModelError(f"model {model.name}: its chat model takes no tools (model.action_format: tools); use text")
    tools = wanted == "tools" or (wanted == "auto" and model.tools_by_default)
    return Exchange(settings.agent.single_call, TOOLS if tools else TEXT)


@lru_cache(maxsize=8)
def placeholders(prompt: str, actions: tuple[str, ...]) -> frozenset[str]:
    """The placeholders of a prompt (`<file>`, `<command>`, `<int>`): what it writes in angle brackets that is no tag
    of an action."""
    tags = {f"<{name}>" for name in actions}
    return frozenset(found for found in PLACEHOLDER.findall(prompt) if found.lower() not in tags)
