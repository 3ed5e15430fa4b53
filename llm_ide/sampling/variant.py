"""Action sampling and demonstrations as variants. `Sampling` (`sampling.k` > 1) takes the place of `act`:
k candidate replies, identical actions folded, one chosen (on `sampling.model` when set: a model of its own, whose
calls do not count in the agent model's call index). `Demonstrations` puts trajectories of ours into the system
prompt as worked examples."""

from __future__ import annotations

from typing import Any

from llm_ide.conversation import memo
from llm_ide.models import get_model
from llm_ide.sampling.choose import sampler_calls
from llm_ide.sampling.demonstrations import render_demonstrations
from llm_ide.sampling.sampled_act import sampled_act
from llm_ide.sampling.settings import Demonstrations as DemonstrationPaths
from llm_ide.sampling.settings import SamplingSettings
from llm_ide.variant import Node, Opening, Variant


class Sampling(Variant):
    name = "sampling"
    sections = {"sampling": (SamplingSettings, SamplingSettings)}

    @classmethod
    def enabled(cls, settings: Any) -> Sampling | None:
        return cls() if settings.sampling.k > 1 else None

    def replaces(self) -> dict[str, Node]:
        return {"act": sampled_act}

    def open(self, ctx: Any, opening: Opening) -> Any:
        """The model of the choosing calls, when it is not the agent's."""
        sampling = ctx.settings.sampling
        if not sampling.model or sampling.k == 1:
            return None
        model = get_model(sampling.model, ctx.settings.model, opening.base_url)
        model.listener = opening.listener
        return model

    def foreign_calls(self, ctx: Any, state: dict[str, Any]) -> int:
        return sampler_calls(state) if ctx.resources.get(self.name) is not None else 0  # type: ignore[arg-type]


class Demonstrations(Variant):
    name = "demonstrations"
    sections = {"demonstrations": (DemonstrationPaths, list)}

    @classmethod
    def enabled(cls, settings: Any) -> Demonstrations | None:
        return cls() if settings.demonstrations else None

    def system_section(self, ctx: Any) -> str:
        return memo(ctx, ("demonstrations",), lambda: render_demonstrations(ctx.settings))
