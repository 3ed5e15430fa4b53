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
        """The person's answer; one that does not fit the question asks it again, saying why (`refused`): it is kept
        by the thread as the first one's answer, so a later one must be a new question's."""
        question = {"kind": kind, "timeout": timeout, **payload}
        answer = as_mapping(kind, interrupt(question))
        while problem := refusal(kind, answer):
            answer = as_mapping(kind, interrupt({**question, "refused": problem}))
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


ANSWERS = {  # what each question takes (`timeout: true`: none came in time); a bare value is the first field
    "permission": {"approved": bool, "reason": str},
    "review": {"passed": bool, "approved": bool, "comment": str, "reason": str, "plan": str},
    "guidance": {"answer": str, "reason": str},
}


def as_mapping(kind: str, answer: Any) -> dict[str, Any]:
    """A bare answer is the question's first field (`True` approves a permission, a text answers a guidance)."""
    return answer if isinstance(answer, dict) else {next(iter(ANSWERS[kind])): answer}


def refusal(kind: str, answer: dict[str, Any]) -> str | None:
    """Why the answer does not fit a `kind` question (`"false"` is no denial, `{"approve": true}` no approval)."""
    fields = {**ANSWERS[kind], "timeout": bool}
    wrong = [name for name, value in answer.items() if name not in fields or not isinstance(value, fields[name])]
    needed = {"permission": ("approved",), "review": ("passed", "approved")}.get(kind, ())
    if wrong or (needed and not answer.get("timeout") and not any(name in answer for name in needed)):
        said = ", ".join(f"{name}: {kind_name(kind_of)}" for name, kind_of in fields.items())
        return f"the answer to the navigator's {kind} question takes {{{said}}}, not {answer!r:.120}"
    return None


def kind_name(kind: type) -> str:
    return "true or false" if kind is bool else "text"
