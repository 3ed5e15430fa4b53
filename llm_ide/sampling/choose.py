"""One candidate chosen: `ask_colleagues` (one call sees them all) or `pairwise` (the best so far against the next)."""

from __future__ import annotations

import json
from typing import Any

from llm_ide.models import Message, Model, ModelReply
from llm_ide.prompting import render_string
from llm_ide.sampling.candidates import Candidate
from llm_ide.text import extract_tag
from llm_ide.variant import AgentContext, ModelCall, ModelRequest


def candidate_text(ctx: AgentContext, candidate: Candidate, number: int) -> str:
    action = candidate.action
    return render_string(
        ctx.settings.sampling.templates.candidate,
        number=number,
        samples=candidate.samples,
        thought=action.thought,
        action_type=action.action_type,
        params=json.dumps(action.action_params, ensure_ascii=False),
    )


def parse_choice(text: str, count: int) -> int | None:
    """The 1-based number in the reply's `<choice>` tag, when it names one of `count` candidates."""
    raw = (extract_tag(text, "choice", required=False) or "").strip().strip("`'\"*#").strip()
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= count else None


def majority(candidates: list[Candidate]) -> int:
    """The candidate proposed most often (the first on a tie): the choice when the chooser's reply is unusable."""
    return max(range(len(candidates)), key=lambda position: (candidates[position].samples, -position))


class Chooser:
    """The choosing calls of one step, each continuing the act conversation (its prefix served from the prompt
    cache, with its tools where the actions are tools), on `sampling.model` when it is set (`model`), else on the
    agent's."""

    def __init__(self, ctx: AgentContext, request: ModelRequest, call: ModelCall, model: Model | None) -> None:
        self.ctx, self.messages, self.tools, self.call, self.model = ctx, request.messages, request.tools, call, model
        self.replies: tuple[ModelReply, ...] = ()

    def ask(self, kind: str, question: str) -> str:
        messages: list[Message] = [*self.messages, {"role": "user", "content": question}]
        response = self.call(ModelRequest(kind, messages, model=self.model, tools=self.tools))
        self.replies += response.charged
        return response.text

    def ask_colleagues(self, candidates: list[Candidate]) -> tuple[int, dict[str, Any]]:
        listing = "\n\n".join(candidate_text(self.ctx, c, number) for number, c in enumerate(candidates, 1))
        reply = self.ask("ask_colleagues", render_string(self.templates.ask_colleagues, candidates=listing))
        pick = parse_choice(reply, len(candidates))
        chosen = majority(candidates) if pick is None else pick - 1
        return chosen, {"reason": reply, "fallback": pick is None}

    def pairwise(self, candidates: list[Candidate]) -> tuple[int, dict[str, Any]]:
        """k-1 comparisons: the best so far against the next candidate; an unusable reply keeps the best so far."""
        best, rounds = 0, []
        for other in range(1, len(candidates)):
            question = render_string(
                self.templates.pairwise,
                first=candidate_text(self.ctx, candidates[best], 1),
                second=candidate_text(self.ctx, candidates[other], 2),
            )
            reply = self.ask("pairwise", question)
            pick = parse_choice(reply, 2)
            winner = other if pick == 2 else best
            rounds.append({"pair": [best + 1, other + 1], "winner": winner + 1, "reason": reply, "usable": bool(pick)})
            best = winner
        return best, {"rounds": rounds, "fallback": not all(round_["usable"] for round_ in rounds)}

    @property
    def templates(self) -> Any:
        return self.ctx.settings.sampling.templates

    def choose(self, candidates: list[Candidate]) -> tuple[int, dict[str, Any]]:
        """The chosen candidate's position and the record of the choice (method, calls, reasons)."""
        method = self.ctx.settings.sampling.choice
        if len(candidates) == 1:
            return 0, {"method": "unanimous", "calls": 0}
        chosen, detail = self.ask_colleagues(candidates) if method == "ask_colleagues" else self.pairwise(candidates)
        model = {"model": self.model.name} if self.model is not None else {}
        return chosen, {"method": method, "calls": len(self.replies), **model, **detail}
