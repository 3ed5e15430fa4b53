"""The `verify` node: the attempts' patches checked by execution before the reviewer and the chooser judge them. Each
variant of the attempts' runs that verifies (llm_ide/verification.py) gets the finished attempts and a bench of
clean environments (the base commit with a patch applied: a new container, or a git worktree of the repository); its
facts go to the reviewer and the chooser, its ranks to the choice, its record (what it ran) stays in the state so that
nothing runs twice."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.attempts.context import AttemptsContext, worktree
from llm_ide.attempts.state import AttemptRecord, AttemptsState
from llm_ide.composition import compose
from llm_ide.environments import capabilities, make_environment
from llm_ide.environments.base import Environment
from llm_ide.errors import EnvironmentFailure, LlmIdeError
from llm_ide.verification import Finished, Verifier
from llm_ide.workspace.lifecycle import base_commit
from llm_ide.workspace.patch import PatchError, keep_base
from llm_ide.workspace.putback import put_back

log = logging.getLogger("llm_ide.run")


@dataclass
class Bench:
    """Clean environments for one task's attempts, as their runs would start (same kind, image and repository)."""

    ctx: AttemptsContext
    settings: Any
    base: str

    def emit(self, phase: str) -> None:
        self.ctx.emit(phase)

    def worktree(self, label: str) -> Path:
        """A fresh git worktree of the repository at the base commit (a killed run's leftover replaced)."""
        assert self.ctx.repo is not None
        path = (self.ctx.request.output_dir / "verify" / label).resolve()
        worktree(self.ctx.repo, "remove", "--force", str(path), check=False)
        worktree(self.ctx.repo, "prune", check=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        worktree(self.ctx.repo, "add", "--detach", "-f", str(path), self.base)
        return path

    @contextmanager
    def clean(self, label: str, patch: str) -> Iterator[Environment]:
        ctx = self.ctx
        kind = ctx.request.environment or self.settings.environment.type
        settings = self.settings.environment.model_copy(update={"type": kind})
        run_id = f"{ctx.request.run_id}-verify-{label}"
        local = not capabilities(kind).ephemeral
        tree = self.worktree(label) if local else None
        env = make_environment(settings, tree or ctx.repo, run_id, ctx.request.image)
        try:
            base = self.base or base_commit(env)
            if not base:
                raise EnvironmentFailure("a clean environment needs a git repository with a commit")
            try:
                put_back(keep_base(env, base), patch, self.settings.patch)
            except PatchError as error:
                raise EnvironmentFailure(f"the patch does not apply to the base commit: {error}") from None
            yield env
        finally:
            env.close()
            if tree is not None:
                worktree(ctx.repo, "remove", "--force", str(tree), check=False)


def finished(ctx: AttemptsContext, record: AttemptRecord) -> Finished:
    try:
        info = json.loads((ctx.request.output_dir / record.get("trajectory", "")).read_text(encoding="utf-8"))["info"]
    except (OSError, ValueError, KeyError):
        info = {}
    return Finished(record["index"], record.get("submission", ""), info or {})


def verify(state: AttemptsState, runtime: Runtime[AttemptsContext]) -> dict[str, Any]:
    ctx = runtime.context
    settings = ctx.settings.merged({"attempts": {"max": 1}}, origin="attempts")  # what each attempt ran with
    verifying = [v for v in compose(settings, ctx.request.variants) if isinstance(v, Verifier)]
    if not verifying:
        return {}
    runs = [finished(ctx, record) for record in state.get("attempts", [])]
    bench = Bench(ctx, settings, state.get("base_commit") or "")
    records = dict(state.get("verification") or {})
    checks: dict[int, dict[str, Any]] = {run.index: {} for run in runs}
    ranks: dict[int, list[int]] = {run.index: [] for run in runs}
    for variant in verifying:
        try:
            verified = variant.verify(bench, runs, records.get(variant.name) or {})
        except LlmIdeError as error:  # e.g. no environment could start: the attempts are judged without it
            log.error("verification by %s failed: %s", variant.name, error)
            ctx.emit(f"verification by {variant.name} failed: {error}")
            continue
        if verified is None:
            continue
        records[variant.name] = verified.record
        for index in checks:
            checks[index] |= verified.facts.get(index, {})
            ranks[index] += verified.ranks.get(index, ())
    if not records:
        return {}
    updates = [AttemptRecord(index=index, checks=checks[index], rank=ranks[index]) for index in checks]
    return {"verification": records, "attempts": updates}
