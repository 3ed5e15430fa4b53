"""The `choose` node: execution first, then the models. The distinct non-empty patches are narrowed to those ranked
best by running them (`verify`: the reproductions they pass, then the fewest regressions); among those, an accepted
attempt if there is one, the only one left, or one chooser call over them (each a diff with its reasoning summary and
facts), or the best review score (`attempts.choose: best_score`)."""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.attempts.context import AttemptsContext
from llm_ide.attempts.review import NUMBER
from llm_ide.attempts.state import AttemptRecord, AttemptsState
from llm_ide.prompting import render_string, truncate
from llm_ide.text import extract_tag


def candidates(attempts: list[AttemptRecord]) -> list[list[AttemptRecord]]:
    """The attempts grouped by patch (identical ones, whitespace aside, together), empty patches left out."""
    groups: dict[str, list[AttemptRecord]] = {}
    for record in attempts:
        patch = record.get("submission", "")
        if patch.strip():
            groups.setdefault(re.sub(r"\s+", " ", patch).strip(), []).append(record)
    return list(groups.values())


def ranked_best(groups: list[list[AttemptRecord]]) -> list[list[AttemptRecord]]:
    """The groups whose rank by execution is the lowest (all of them when nothing was ranked)."""
    ranks = [tuple(group[0].get("rank") or ()) for group in groups]
    if not any(ranks):
        return groups
    lowest = min(ranks)
    return [group for group, rank in zip(groups, ranks, strict=True) if rank == lowest]


def unfaulted(record: AttemptRecord) -> bool:
    """Nothing wrong found by running its patch (or it was not run)."""
    return not any(record.get("rank") or ())


def best(records: list[AttemptRecord]) -> AttemptRecord:
    return max(records, key=lambda record: (record.get("score") or 0.0, -record["index"]))


def ask_chooser(
    ctx: AttemptsContext, task: str, groups: list[list[AttemptRecord]]
) -> tuple[AttemptRecord, str, dict[str, Any]]:
    settings = ctx.settings.attempts
    shown = [
        {
            "number": number,
            "attempts": [record["index"] for record in group],
            "score": group[0].get("score"),
            "summary": group[0].get("chain", ""),
            "facts": {**(group[0].get("facts") or {}), **(group[0].get("checks") or {})},
            "patch": truncate(group[0]["submission"], settings.patch_chars, ctx.settings.templates),
        }
        for number, group in enumerate(groups, 1)
    ]
    text, call = ctx.ask(
        "choose",
        render_string(settings.templates.choose_system),
        render_string(settings.templates.choose, task=task, candidates=shown),
    )
    found = NUMBER.search(extract_tag(text, "choice", required=False) or "")
    number = int(float(found.group())) if found else 0
    reasons = " ".join((extract_tag(text, "reasons", required=False) or text).split())
    if not 1 <= number <= len(groups):  # an answer naming no candidate: the best review instead
        return best([group[0] for group in groups]), f"no valid choice in the reply ({reasons[:200]})", call
    return groups[number - 1][0], reasons, call


def choose(state: AttemptsState, runtime: Runtime[AttemptsContext]) -> dict[str, Any]:
    ctx = runtime.context
    settings = ctx.settings.attempts
    attempts = state.get("attempts", [])
    accept = settings.accept_score
    every = candidates(attempts)
    groups = ranked_best(every)
    kept = {record["index"] for group in groups for record in group}
    accepted = [r for r in attempts if accept is not None and (r.get("score") or 0) >= accept and r["index"] in kept]
    calls: list[dict[str, Any]] = []
    if accepted:
        chosen, by, reasons = best(accepted), "accept_score", best(accepted).get("reasons", "")
    elif not groups:
        chosen, by, reasons = None, "none", "no attempt changed a file"
    elif len(groups) == 1 and len(every) > 1:
        chosen, by, reasons = groups[0][0], "execution", "the only patch ranked best by running it"
    elif len(groups) == 1:
        chosen, by, reasons = groups[0][0], "only", "the only distinct non-empty patch"
    elif settings.choose == "best_score" or (ctx.budget is not None and ctx.budget.exhausted):
        chosen = best([group[0] for group in groups])  # the task's budget spent: no chooser call
        by, reasons = "best_score", chosen.get("reasons", "")
    else:
        chosen, reasons, call = ask_chooser(ctx, state["task"], groups)
        by, calls = "chooser", [call]
    last = attempts[-1] if attempts else {}
    outcome = chosen or last
    ctx.emit(f"chosen: attempt {chosen['index']} ({by})" if chosen else "chosen: none (no patch)", reasons)
    return {
        "chosen": chosen["index"] if chosen else None,
        "chosen_by": by,
        "choice_reasons": reasons,
        "execution_pick": sorted(kept) if len(groups) < len(every) else [],
        "calls": calls,
        "exit_status": outcome.get("exit_status") or "error",
        "submission": chosen["submission"] if chosen else "",
        **({"error": f"attempt {outcome['index']}: {outcome['error']}"} if outcome.get("error") else {}),
    }
