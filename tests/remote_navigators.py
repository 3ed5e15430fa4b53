"""Navigators of another party, served by `llm-ide navigator serve --navigator tests.remote_navigators:NAME` in the
MCP tests: a remote agent with its own rules, one that is slow to answer, one whose model fails."""

from __future__ import annotations

import os
import time
from pathlib import Path

from llm_ide.errors import ModelError
from llm_ide.navigator.protocol import Decision, Guidance, NavigatorUsage, PermissionRequest, Review, ReviewRequest

ONE_CALL = NavigatorUsage(api_calls=1, input_tokens=120, cache_read_tokens=90, output_tokens=8, cost=0.0021)


class RulesNavigator:
    """Tests are not to be touched; a patch with a debug print fails review; questions about the task are answered."""

    def request_permission(self, request: PermissionRequest) -> Decision:
        if "tests/" in request.diff:
            return Decision(approved=False, reason=f"leave the tests alone ({request.action})", usage=ONE_CALL)
        return Decision(approved=True, reason=f"fine: {request.reason or request.action}", usage=ONE_CALL)

    def request_review(self, request: ReviewRequest) -> Review:
        if "print(" in request.patch:
            return Review(passed=False, comment="remove the debug print", usage=ONE_CALL)
        return Review(passed=True, comment=f"looks right: {request.summary}", usage=ONE_CALL)

    def request_guidance(self, question: str) -> Guidance:
        return Guidance(answer=f"start from the failing test; you asked: {question}", usage=ONE_CALL)


class SlowNavigator(RulesNavigator):
    """Answers a permission only once the file named by $RELEASE_NAVIGATOR exists (and makes $ASKED_NAVIGATOR, if
    set, when it starts waiting)."""

    def request_permission(self, request: PermissionRequest) -> Decision:
        if asked := os.environ.get("ASKED_NAVIGATOR"):
            Path(asked).touch()
        release = Path(os.environ["RELEASE_NAVIGATOR"])
        while not release.exists():
            time.sleep(0.05)
        return super().request_permission(request)


class FailingNavigator(RulesNavigator):
    def request_review(self, request: ReviewRequest) -> Review:
        raise ModelError("model openai:gpt-x failed after 3 attempts: APIConnectionError: Connection refused")
