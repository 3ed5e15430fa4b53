"""`n` replies to one request, each recorded and charged through the run's call policy (call_policy.py): what a
model call of the step asks when it wants several candidates (a sampler's `k`). One request where the provider takes
`n` (a proxy whose provider refuses it: `n` requests from then on), else `n` requests at the same time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llm_ide.call_policy import CallPolicy, Tools
from llm_ide.calls import Call
from llm_ide.chat_wire import calls_out
from llm_ide.errors import ModelAuthError, ModelError, ModelTimeLimit
from llm_ide.kills import interrupts_held
from llm_ide.models import Message, Model, ModelReply
from llm_ide.prompting import render

log = logging.getLogger("llm_ide.call_policy")  # its warnings, as they were when these were its methods


def call_n(
    policy: CallPolicy,
    model: Model,
    messages: Sequence[Message],
    n: int,
    /,
    *,
    kind: str,
    deadline: float | None = None,
    tools: Tools = None,
    batched: bool = True,
    index: int = 0,
    **fields: Any,
) -> tuple[list[ModelReply], list[ModelReply]]:
    """`n` replies, and the calls that made them as recorded and charged: one request when the provider takes `n`
    (and `batched`), else `n` requests at the same time (recorded at `index`, `index + 1`, …)."""
    masked = policy.mask(messages)
    if batched and getattr(model, "takes_n", False):
        try:
            return _one_request(policy, model, masked, n, kind, deadline, tools, index=index, **fields)
        except (ModelAuthError, ModelTimeLimit):
            raise
        except ModelError as error:  # e.g. a proxy whose provider takes no `n`: n requests, now and from then on
            log.warning(
                "model %s: a request for %d choices failed (%s); asking %d requests instead",
                model.name,
                n,
                error,
                n,
            )
            model.n_refused = True  # type: ignore[attr-defined]
    results: list[tuple[Any, float]] = [(None, 0.0)] * n
    out: list[list[Call]] = [[] for _ in range(n)]  # each place's call, once it started
    settled: list[ModelReply] = []
    try:
        with policy.room(n) as reservation:
            _together(policy, model, masked, results, out, deadline, tools)
            if failed := next((result for result, _ in results if isinstance(result, BaseException)), None):
                raise failed
        shares = [reservation] + [0.0] * (n - 1)  # the first reply settles the reservation of all n
        with interrupts_held():  # their records and charges whole: an interrupt in them comes after them
            for position, ((reply, started), held) in enumerate(zip(results, shares, strict=True)):
                settled.append(
                    policy.settle(model, masked, reply, started, held, kind=kind, index=index + position, **fields)[0]
                )
        return settled, settled
    except BaseException:  # one failed, or Ctrl-C while the others were under way or before the replies were settled:
        with interrupts_held():  # the replies in are paid, and the requests still out
            for position, (result, started) in enumerate(results[len(settled) :], len(settled)):
                for paid in _paid(model, result, out[position], masked, tools):
                    policy.settle(model, masked, paid, started, kind=kind, index=index + position, **fields)
        raise


def _paid(model: Model, result: Any, out: list[Call], masked: list[Message], tools: Tools) -> Sequence[ModelReply]:
    """What one of the n calls is paid: its reply, the requests its error carries, or (a Ctrl-C came while it was
    out: no result) its requests as the model prices a call stopped."""
    if isinstance(result, ModelReply):
        return [result]
    if result is None and out and (stopped := getattr(model, "stopped", None)) is not None:
        return stopped(out[-1], masked, tools)
    return getattr(result, "paid", ())


def _one_request(
    policy: CallPolicy,
    model: Any,
    masked: list[Message],
    n: int,
    kind: str,
    deadline: float | None,
    tools: Tools,
    **fields: Any,
) -> tuple[list[ModelReply], list[ModelReply]]:
    started = time.perf_counter()
    made: list[ModelReply] = []  # the choices, from the client's return until they are recorded and charged
    try:
        with policy.room() as reservation:
            made.extend(model.complete_n(masked, n, deadline=deadline, tools=tools))
        replies = [policy.cleaned(reply) for reply in made]
        texts = [reply.shown() for reply in replies]
        combined = replace(
            replies[0], text=render(policy.templates, "choices", texts=texts) if policy.templates else ""
        )
        with interrupts_held():  # its record and charge whole: an interrupt in them comes after them
            charged, _ = policy.settle(
                model, masked, replace(combined, tool_calls=()), started, reservation, **fields, kind=kind
            )
            made.clear()
        return replies, [charged]
    except BaseException as error:  # the request, out when a Ctrl-C came, is paid for its prompt; its choices, come
        with interrupts_held():  # before it, as they came (the first carries the request's usage): recorded, charged
            for paid in getattr(error, "paid", None) or made[:1]:
                policy.settle(model, masked, paid, started, kind=kind, **fields)
        raise


def _together(
    policy: CallPolicy,
    model: Model,
    masked: list[Message],
    results: list[tuple[Any, float]],
    out: list[list[Call]],
    deadline: float | None,
    tools: Tools,
) -> None:
    """One call per place in `results`, each in its own (daemon) thread, so they take the time of the slowest and
    Ctrl-C is not held up by them; one after the other for a model that answers at once. Each reply, or the error its
    call raised, with when its call started, put in its place as it comes (those in when a Ctrl-C came are paid); the
    model's call, as it starts, in its place in `out` (those still out when a Ctrl-C came are paid too)."""
    n = len(results)

    def one(position: int) -> None:
        started = time.perf_counter()
        results[position] = (None, started)
        told = calls_out.set(out[position])
        try:
            results[position] = (policy.complete(model, masked, deadline, tools), started)
        except BaseException as error:  # handed to the caller's thread
            results[position] = (error, started)
        finally:
            calls_out.reset(told)

    if getattr(model, "concurrent", True):
        threads = [threading.Thread(target=one, args=(position,), daemon=True) for position in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        for position in range(n):
            one(position)
