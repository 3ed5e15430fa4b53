"""The k candidate replies of one `act` (k requests, or one with the provider's `n`), parsed and folded."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from llm_ide.budget import admitted
from llm_ide.conversation import Message
from llm_ide.errors import ModelAuthError, ModelError
from llm_ide.models import Model, ModelReply, ModelTimeLimit
from llm_ide.nodes.model_call import account, agent_call_index, wall_deadline
from llm_ide.parsing import FormatError, Grammar, ParsedAction, parse_action, parse_single_reply
from llm_ide.prompting import render_string
from llm_ide.resources import AgentContext
from llm_ide.secrets import redact
from llm_ide.state.graph_state import AgentState, Usage, empty_usage
from llm_ide.state.operations import Reflection

log = logging.getLogger(__name__)


@dataclass
class Candidate:
    """A distinct candidate action; `samples` counts the replies that proposed it (identical actions fold)."""

    action: ParsedAction
    reflection: Reflection | None
    samples: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return self.action.action_type, json.dumps(self.action.action_params, sort_keys=True)

    def record(self, chosen: bool) -> dict[str, Any]:
        return {
            "thought": self.action.thought,
            "action_type": self.action.action_type,
            "action_params": self.action.action_params,
            "samples": self.samples,
            "chosen": chosen,
        }


def sample_replies(ctx: AgentContext, state: AgentState, messages: list[Message], k: int) -> tuple[list[str], Usage]:
    """k replies of the agent's model to the act conversation, asked at the same time; each call recorded (kind
    `act`), charged and counted in order."""
    model = ctx.model
    if ctx.settings.sampling.n == "auto" and getattr(model, "takes_n", False):
        try:
            return sample_at_once(ctx, state, messages, k)
        except (ModelAuthError, ModelTimeLimit):
            raise
        except ModelError as error:  # e.g. a proxy whose provider takes no `n`: k requests, now and from now on
            log.warning("model %s: a request for %d choices failed (%s); asking %d requests instead", model.name, k,
                        error, k)  # fmt: skip
            model.n_refused = True
    messages = ctx.policy.mask(messages)
    usage: dict[str, Any] = {**empty_usage(), **(state.get("usage") or {})}
    first = agent_call_index(ctx, state, usage["api_calls"])
    with admitted(ctx.policy.budget, k) as reservation:
        replies = complete_together(model, messages, range(first, first + k), wall_deadline(ctx, state))
    settle = [reservation] + [0.0] * (k - 1)  # the first reply settles the reservation of all k
    texts = [
        account(ctx, state, "act", messages, reply, started, usage, model, held)
        for (reply, started), held in zip(replies, settle, strict=True)
    ]
    return texts, Usage(**usage)


def complete_together(
    model: Model, messages: list[Message], indexes: range, deadline: float | None
) -> list[tuple[ModelReply, float]]:
    """One call per index, each in its own (daemon) thread: the k samples take the time of the slowest, and Ctrl-C
    is not held up by them. Each reply with the time its call started; the first failure is raised."""
    results: list[tuple[ModelReply, float] | BaseException | None] = [None] * len(indexes)

    def one(position: int, index: int) -> None:
        started = time.perf_counter()
        try:
            results[position] = (model.complete(messages, call_index=index, deadline=deadline), started)
        except BaseException as error:  # handed to the caller's thread
            results[position] = error

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in enumerate(indexes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [result for result in results if result is not None]


def sample_at_once(ctx: AgentContext, state: AgentState, messages: list[Message], k: int) -> tuple[list[str], Usage]:
    """One request for the k replies (the provider's `n`): the prompt is paid once. Recorded as one call."""
    messages = ctx.policy.mask(messages)
    usage: dict[str, Any] = {**empty_usage(), **(state.get("usage") or {})}
    started = time.perf_counter()
    index = agent_call_index(ctx, state, usage["api_calls"])
    with admitted(ctx.policy.budget) as reservation:
        replies = ctx.model.complete_n(messages, k, call_index=index, deadline=wall_deadline(ctx, state))
    texts = [ctx.policy.capped(redact(reply.text)) for reply in replies]
    combined = replace(replies[0], text=render_string(ctx.settings.sampling.templates.choices, texts=texts))
    account(ctx, state, "act", messages, combined, started, usage, ctx.model, reservation)
    return texts, Usage(**usage)


def parse_reply(text: str, single: bool, grammar: Grammar) -> tuple[ParsedAction, Reflection | None]:
    """A candidate's action (and, with `agent.single_call`, its reflection on the previous operation)."""
    if not single:
        return parse_action(text, grammar), None
    reflection, action = parse_single_reply(text, grammar)
    return action, reflection


def fold(texts: list[str], single: bool, grammar: Grammar) -> tuple[list[Candidate], list[tuple[str, FormatError]]]:
    """The distinct candidates in first-seen order, and the replies that could not be parsed."""
    candidates: dict[tuple[str, str], Candidate] = {}
    failures: list[tuple[str, FormatError]] = []
    for text in texts:
        try:
            action, reflection = parse_reply(text, single, grammar)
        except FormatError as error:
            failures.append((text, error))
            continue
        candidate = Candidate(action, reflection)
        if candidate.key in candidates:
            candidates[candidate.key].samples += 1
        else:
            candidates[candidate.key] = candidate
    return list(candidates.values()), failures
