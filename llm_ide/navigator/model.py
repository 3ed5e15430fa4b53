"""The model navigator: a model in its own isolated context that explores the repository read-only, with its own
structured memory (operation chain and scored code context, rendered by the driver's snapshot machinery), and answers
permission, review, guidance and planning requests."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.actions import CORE_GRAMMAR, execute_action
from llm_ide.call_policy import CallPolicy
from llm_ide.calls import CallProgress
from llm_ide.codebase import Codebase
from llm_ide.endpoint import request_cancel
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.errors import ConfigError, FormatError, ModelError
from llm_ide.models import Model, ModelTimeLimit, get_model
from llm_ide.navigator.gate import explorable
from llm_ide.navigator.protocol import (
    Decision,
    Guidance,
    NavigatorAbandoned,
    NavigatorError,
    NavigatorTimeout,
    NavigatorUsage,
    PermissionRequest,
    Plan,
    Review,
    ReviewRequest,
)
from llm_ide.navigator.settings import PROMPTS
from llm_ide.nodes.render_context import snapshot_text
from llm_ide.parsing import parse_action
from llm_ide.prompting import render_string, truncate
from llm_ide.setting_errors import Layers
from llm_ide.settings import CoreSettings, TemplateSet, bundled_yaml, read_yaml, validate
from llm_ide.state.context import Chunk, add_scope, count_references, parse_references, with_operation
from llm_ide.state.operations import OperationNode
from llm_ide.text import extract_tag
from llm_ide.variant import AgentContext

ANSWER = re.compile(r"<\s*(approve|deny|pass|fail|answer|plan)\s*>", re.IGNORECASE)
Message = dict[str, str]


class NavigatorTemplates(TemplateSet):
    system: str
    plan: str
    permission: str
    review: str
    guidance: str
    observation: str
    refused: str
    answer_now: str
    format_error: str


def load_templates(path: str | None) -> NavigatorTemplates:
    """The navigator's templates: the bundled ones, those of the `navigator.prompts` file over them (an error: one line
    naming the file and the template)."""
    bundled = {key: value for key, value in bundled_yaml(PROMPTS).items() if key not in ("driver", "tools", "lines")}
    layers: Layers = [(PROMPTS, bundled)]
    if path:
        try:
            layers.append((f"navigator.prompts {path}", read_yaml(Path(path))))
        except ConfigError as error:
            raise NavigatorError(f"navigator.prompts {path}: cannot be read ({error})") from None
    try:
        return validate(NavigatorTemplates, layers)
    except ConfigError as error:
        raise NavigatorError(str(error)) from None


class ModelNavigator:
    """Implements `Navigator` and `Planner`. Its memory (`nodes`, `chunks`) outlives each request: what it explored
    for the plan is in its snapshot when it reviews."""

    def __init__(
        self,
        settings: CoreSettings,
        model: Model,
        codebase: Codebase,
        task: str = "",
        calls: int = 0,
        record_call: Callable[[dict[str, Any]], None] | None = None,
        policy: CallPolicy | None = None,
    ) -> None:
        self.ctx = AgentContext(settings=settings, model=model, codebase=codebase)  # its own, isolated
        self.policy = (policy or CallPolicy()).recording(self._spent_on)  # the run's budget; its calls recorded here
        self.config = settings.navigator
        self.templates = load_templates(self.config.prompts)
        self.task = task
        self.plan_text = ""
        self.nodes: list[OperationNode] = []
        self.chunks: list[Chunk] = []
        self.usage = NavigatorUsage(api_calls=calls)
        self.record_call = record_call
        self.calls: list[dict[str, Any]] = []  # the calls not yet taken by `drain`
        self.env: Any = None
        self.abandoned = threading.Event()  # set by a server whose client gave up: the request under way stops

    @classmethod
    def create(
        cls, settings: CoreSettings, model_spec: str, repo: Path, base_url: str | None = None, task: str = ""
    ) -> ModelNavigator:
        """A navigator of its own over a local repository (`llm-ide navigator serve`); `close()` it when done."""
        model = get_model(model_spec, settings.model, base_url)
        # read-only: the tests a reviewer runs leave no __pycache__ in the repository either
        quiet = {"type": LocalEnvironment.kind, "tools": [], "env": {"PYTHONDONTWRITEBYTECODE": "1"}}
        local = settings.merged({"environment": quiet}, origin="navigator")
        env = make_environment(local.environment, repo, "navigator", None)
        codebase = Codebase.for_settings(env, local)
        navigator = cls(local, model, codebase, task=task)
        navigator.env = env
        model.listener = navigator.cut_if_abandoned  # type: ignore[attr-defined]  # replies stream in: cut if left
        return navigator

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    def drain(self) -> list[dict[str, Any]]:
        calls, self.calls = self.calls, []
        return calls

    # the protocol

    def plan(self, task: str) -> Plan:
        self.task = task or self.task
        tag, body, usage = self._consult("plan", {}, ("plan",), tests=False)
        self.plan_text = body
        return Plan(text=body, usage=usage)

    def bounded(self, limit: int, **texts: str) -> dict[str, str]:
        """A request's texts as far as the navigator's prompt takes them (an MCP client's come in any size)."""
        return {name: truncate(text, limit, self.ctx.templates) for name, text in texts.items()}

    def request_permission(self, request: PermissionRequest) -> Decision:
        texts = self.bounded(self.config.context_chars, **request.model_dump(exclude={"diff"}))
        request = request.model_copy(update=texts | self.bounded(self.config.diff_chars, diff=request.diff))
        tag, body, usage = self._consult("permission", {"request": request}, ("approve", "deny"), tests=False)
        return Decision(approved=tag == "approve", reason=body, usage=usage)

    def request_review(self, request: ReviewRequest, round: int = 1) -> Review:
        cut = self.bounded(self.config.patch_chars, patch=request.patch)
        request = request.model_copy(update=cut | self.bounded(self.config.context_chars, summary=request.summary))
        tests = self.config.review_runs_tests
        values = {"request": request, "round": round, "rounds": self.config.max_review_rounds}
        deadline = time.monotonic() + self.config.review_timeout
        tag, body, usage, reply = self._consult_reply("review", values, ("pass", "fail"), tests, deadline)
        plan = extract_tag(reply, "plan", required=False) or ""
        if plan:
            self.plan_text = plan
        return Review(passed=tag == "pass", comment=body, plan=plan, usage=usage)

    def request_guidance(self, question: str) -> Guidance:
        question = truncate(question, self.config.context_chars, self.ctx.templates)
        tag, body, usage = self._consult("guidance", {"question": question}, ("answer",), tests=False)
        return Guidance(answer=body, usage=usage)

    # the exploration loop

    def _consult(self, kind: str, values: dict[str, Any], answers: tuple[str, ...], tests: bool):
        tag, body, usage, _ = self._consult_reply(kind, values, answers, tests, None)
        return tag, body, usage

    def _consult_reply(
        self, kind: str, values: dict[str, Any], answers: tuple[str, ...], tests: bool, deadline: float | None
    ) -> tuple[str, str, NavigatorUsage, str]:
        """Explore (read-only actions, each remembered) until the reply holds one of `answers`."""
        before = self.usage.model_copy()
        memory = self._memory()
        prompt = render_string(getattr(self.templates, kind), memory=memory, plan=self.plan_text, tests=tests, **values)
        messages: list[Message] = [
            {"role": "system", "content": self._system(tests)},
            {"role": "user", "content": prompt},
        ]
        left = self.config.explore_steps
        for _ in range(self.config.explore_steps + 3):
            reply = self._call(kind, messages, deadline)
            found = next((m for m in ANSWER.finditer(reply) if m.group(1).lower() in answers), None)
            if found is not None:
                tag = found.group(1).lower()
                body = extract_tag(reply[found.start() :], tag) or ""
                return tag, body, self._spent(before), reply
            messages.append({"role": "assistant", "content": reply})
            if left <= 0:
                messages.append({"role": "user", "content": render_string(self.templates.answer_now)})
                continue
            messages.append({"role": "user", "content": self._explore(reply, tests, left - 1)})
            left -= 1
        raise NavigatorError(f"the navigator gave no {'/'.join(answers)} answer to the {kind} request")

    def _explore(self, reply: str, tests: bool, left: int) -> str:
        try:
            action = parse_action(reply, CORE_GRAMMAR)
        except FormatError as error:
            return render_string(self.templates.format_error, error=str(error))
        if not explorable(action.action_type, action.action_params, self.config, tests):
            return render_string(self.templates.refused, action_type=action.action_type)
        outcome = execute_action(self.ctx.codebase, action.action_type, action.action_params)
        observation = truncate(outcome.observation, self.ctx.settings.agent.observation_max_chars, self.ctx.templates)
        node = OperationNode(
            id=len(self.nodes),
            parent_id=self.nodes[-1].id if self.nodes else None,
            thought=action.thought,
            action_type=action.action_type,
            action_params=action.action_params,
            observation=observation,
            returncode=outcome.returncode,
            duration=round(outcome.duration, 3),
        )
        self._remember(node, outcome.accessed)
        return render_string(self.templates.observation, observation=observation, returncode=node.returncode, left=left)

    def _remember(self, node: OperationNode, accessed: list[Any]) -> None:
        """The driver's update_activity, on the navigator's own memory."""
        view = self.ctx.codebase.view
        n = len(self.nodes)
        chunks = list(self.chunks)  # add_scope puts a changed chunk's copy in its place
        touched = {add_scope(chunks, scope, n) for scope in accessed}
        referred = count_references(
            chunks,
            parse_references(node.thought, self.ctx.codebase.env.workdir),
            exists=view.exists,
            locate=view.scopes,
            covers=view.covers,
            n_operations=n,
        )
        self.chunks = with_operation(chunks, touched, referred, n, self.ctx.score_params)
        self.nodes.append(node)

    def _memory(self) -> str:
        state = {"operations": self.nodes, "code_context": self.chunks, "n_operations": len(self.nodes)}
        return snapshot_text(self.ctx, state)  # type: ignore[arg-type]

    def _system(self, tests: bool) -> str:
        return render_string(
            self.templates.system,
            explore_steps=self.config.explore_steps,
            read_only_commands=", ".join(self.config.read_only_commands),
            test_commands=", ".join(self.config.test_commands),
            tests=tests,
            task=self.task,
        )

    def cut_if_abandoned(self, progress: CallProgress) -> None:
        if progress.kind == "text" and self.abandoned.is_set():
            raise NavigatorAbandoned("navigator: the request's client gave up; its answer was cut short")

    def _call(self, kind: str, messages: list[Message], deadline: float | None) -> str:
        if self.abandoned.is_set():
            raise NavigatorAbandoned("navigator: the request's client gave up; no further model call for it")
        index = self.usage.api_calls
        try:
            with request_cancel(self.abandoned):  # a reply not begun yet is dropped too, its connection closed
                reply, _ = self.policy.call(
                    self.ctx.model, messages, kind=f"navigator_{kind}", deadline=deadline, index=index
                )
        except ModelTimeLimit as error:
            raise NavigatorTimeout(f"navigator: {error}") from None
        except ModelError as error:
            if "timeout" in str(error).lower() or "timed out" in str(error).lower():
                raise NavigatorTimeout(f"navigator: {error}") from None
            raise NavigatorError(f"navigator: {error}") from None
        except Exception:
            if self.abandoned.is_set():
                raise NavigatorAbandoned("navigator: the request's client gave up; its answer was cut short") from None
            raise
        return reply.text

    def _spent_on(self, call: dict[str, Any]) -> None:
        """A call the policy recorded, counted in the usage and kept: each reply, and each request paid without one
        (a stream cut, then asked again)."""
        spent = NavigatorUsage(
            api_calls=1,
            input_tokens=call["prompt_tokens"],
            cache_read_tokens=call["cache_read_tokens"],
            cache_write_tokens=call["cache_write_tokens"],
            output_tokens=call["response_tokens"],
            cost=call["cost"],
            estimated_calls=int(bool(call.get("usage_estimated"))),
        )
        self.usage = self.usage.plus(spent)
        self.calls.append({key: value for key, value in call.items() if key != "prompt"})
        if self.record_call is not None:
            self.record_call(call)

    def _spent(self, before: NavigatorUsage) -> NavigatorUsage:
        return self.usage.plus(before, -1)
