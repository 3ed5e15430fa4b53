"""The human navigator: each request is a LangGraph `interrupt()` whose resume value is the person's answer (from the
terminal, from LangGraph Studio, or from a `run_task(..., resume=...)` call)."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from llm_ide.navigator.protocol import Decision, Guidance, NavigatorTimeout, PermissionRequest, Review, ReviewRequest
from llm_ide.navigator.settings import NavigatorSettings


class HumanNavigator:
    def __init__(self, config: NavigatorSettings) -> None:
        self.config = config

    def ask(self, kind: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        answer = interrupt({"kind": kind, "timeout": timeout, **payload})
        if not isinstance(answer, dict):
            answer = {"approved": bool(answer), "passed": bool(answer), "answer": str(answer)}
        if answer.get("timeout"):
            raise NavigatorTimeout(f"no answer from the human navigator within {timeout:g} s")
        return answer

    def request_permission(self, request: PermissionRequest) -> Decision:
        answer = self.ask("permission", request.model_dump(), self.config.permission_timeout)
        return Decision(approved=bool(answer.get("approved")), reason=str(answer.get("reason") or ""), by="human")

    def request_review(self, request: ReviewRequest, round: int = 1) -> Review:
        answer = self.ask("review", {**request.model_dump(), "round": round}, self.config.review_timeout)
        comment = str(answer.get("comment") or answer.get("reason") or "")
        passed = bool(answer.get("passed", answer.get("approved")))
        return Review(passed=passed, comment=comment, plan=str(answer.get("plan") or ""), by="human")

    def request_guidance(self, question: str) -> Guidance:
        answer = self.ask("guidance", {"question": question}, self.config.permission_timeout)
        return Guidance(answer=str(answer.get("answer") or answer.get("reason") or ""), by="human")
