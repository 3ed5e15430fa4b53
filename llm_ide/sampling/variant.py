"""Action sampling and demonstrations as variants, both around the model call. `Sampling` (`sampling.k` > 1): k
candidate replies to the act call, identical actions folded, one chosen (on `sampling.model` when set); the chosen
reply is the step's, every candidate is recorded on the operation. `Demonstrations` puts trajectories of ours ahead
of the system prompt as worked examples (fixed for the run: a stable prefix)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from llm_ide.kills import failpoint
from llm_ide.sampling.candidates import fold
from llm_ide.sampling.choose import Chooser
from llm_ide.sampling.demonstrations import render_demonstrations
from llm_ide.sampling.settings import DEMONSTRATIONS, SAMPLING
from llm_ide.variant import AgentContext, ModelCall, ModelRequest, ModelResponse, ModelUse, Opening, Variant


class Sampling(Variant):
    name = "sampling"
    settings = SAMPLING

    @classmethod
    def enabled(cls, settings: Any) -> Sampling | None:
        return cls() if settings.sampling.k > 1 else None

    def check(self, settings: Any) -> list[ModelUse]:
        """The model of the choosing calls, checked before the run starts as the agent's is."""
        sampling = settings.sampling
        return [ModelUse("sampling.model", sampling.model)] if sampling.model and sampling.k > 1 else []

    def open(self, ctx: AgentContext, opening: Opening) -> Any:
        """The model of the choosing calls, when it is not the agent's."""
        sampling = ctx.settings.sampling
        if not sampling.model or sampling.k == 1 or opening.model_for is None:
            return None
        return opening.model_for(sampling.model, opening.base_url)

    def wrap_model_call(self, ctx: AgentContext, request: ModelRequest, call: ModelCall) -> ModelResponse:
        sampling = ctx.settings.sampling
        if request.kind != "act" or sampling.k == 1 or request.parse is None:
            return call(request)
        sampled = call(replace(request, n=sampling.k, batched=sampling.n == "auto"))
        candidates, failures = fold(sampled.replies, request.parse)
        if not candidates:  # no usable reply: the step reads the first, and asks again as for one malformed reply
            return ModelResponse(sampled.replies[:1], sampled.charged)
        chooser = Chooser(ctx, request, call, ctx.resources.get(self.name))
        chosen, choice = chooser.choose(candidates)
        failpoint("sampling.chosen")  # every call of the step made, its update not yet saved
        marks = {
            "candidates": [candidate.record(position == chosen) for position, candidate in enumerate(candidates)],
            "choice": {**choice, "samples": len(sampled.replies), "unusable": len(failures)},
        }
        return ModelResponse((candidates[chosen].reply,), (*sampled.charged, *chooser.replies), marks)


class Demonstrations(Variant):
    name = "demonstrations"
    settings = DEMONSTRATIONS

    @classmethod
    def enabled(cls, settings: Any) -> Demonstrations | None:
        return cls() if settings.demonstrations else None

    def wrap_model_call(self, ctx: AgentContext, request: ModelRequest, call: ModelCall) -> ModelResponse:
        system, *rest = request.messages
        if system["role"] != "system":
            return call(request)
        shown = ctx.memo.get(("demonstrations",), lambda: render_demonstrations(ctx.settings, ctx.templates))
        return call(replace(request, messages=[{**system, "content": f"{shown}\n\n{system['content']}"}, *rest]))
