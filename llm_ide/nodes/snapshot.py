"""The memory snapshot an epoch starts with, in three parts. The base (lessons, files named, the operation history,
the changes, the code context) is rendered at a full renewal and then kept byte for byte by the renewals that follow,
so the provider's prompt cache still serves it after them. What came since the base follows it: the history
continued, new lessons and files, the changes that differ, the code context as it ranks now without the rows the
base shows. The latest operation as it ran comes last."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache, partial

from llm_ide.codeview.changes import sections, tracked_diff
from llm_ide.codeview.observed import paths_named
from llm_ide.commands import read_whole, written_whole
from llm_ide.conversation import params_texts
from llm_ide.prompting import ROW, render, rows_elided
from llm_ide.state.context import Chunk
from llm_ide.state.graph_state import AgentState, MemoryBase
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain
from llm_ide.state.selection import scored, select_chunks, trim_to_budget
from llm_ide.system_part import capped
from llm_ide.text import first_sentence
from llm_ide.variant import AgentContext

ROW_CHARS = 8  # a rendered row beside its line: the number, the tab, the newline
WHOLE_HORIZON = 40  # operations looked back for a file written whole (then shown whole while it stays active)
READ_WHOLE_FOR = 8  # operations a file read whole stays whole (an agent rewrites one soon after reading it, or not)


def code_context_text(
    ctx: AgentContext,
    chunks: list[Chunk],
    n_operations: int,
    hide: frozenset[str] | None = None,
    since: int = 0,
    whole: tuple[Collection[str], Collection[str]] = ((), ()),
) -> str:
    """The chunks above the threshold within the budget, beside it the files of `whole[0]` whole and the chunks of
    those of `whole[1]`; with `hide` (rows the prompt shows already, left out) only those accessed by an operation from
    `since` on."""
    params = ctx.score_params
    shown = select_chunks(scored(chunks, n_operations, params), params)
    if hide is not None:
        shown = [chunk for chunk in shown if any(chunk.activity.accessed[since:])]
    files, through = whole
    shown = [chunk for chunk in shown if chunk.file_path not in files]
    view = ctx.codebase.view
    view.refresh([*files, *(chunk.file_path for chunk in shown)])
    budgeted = [chunk for chunk in shown if chunk.file_path not in through]  # a file read through: beside it
    trimmed = trim_to_budget(budgeted, view.sizes(budgeted), ctx.settings.memory.context_budget_chars)
    kept = {id(chunk) for chunk in trimmed}
    shown = [chunk for chunk in shown if chunk.file_path in through or id(chunk) in kept]
    shown = [*(Chunk(path, list(range(1, view.line_count(path) + 1))) for path in files), *shown]
    if hide is not None:
        return view.render(shown, reread=False, hide=hide) if shown else ""
    return view.render(shown, reread=False) if shown else render(ctx.templates, "code_context_empty")


def whole_named(ctx: AgentContext, node: OperationNode, reads: bool) -> list[str]:
    """The files an operation wrote whole (`cat > f <<EOF`), and showed whole if `reads` (`cat f`, `nl -ba f`), as
    repo paths."""
    if node.action_type != "bash":
        return []
    command = str(node.action_params.get("command") or "")
    return list(dict.fromkeys(ctx.codebase.view.path(path) for path in named_whole(command, reads)))


@lru_cache(maxsize=4096)
def named_whole(command: str, reads: bool) -> tuple[str, ...]:
    """The files a command writes whole, and shows whole if `reads`, as it names them (kept: the command's alone)."""
    return (*written_whole(command), *filter(None, [read_whole(command) if reads else None]))


def whole_files(ctx: AgentContext, state: AgentState) -> tuple[list[str], list[str]]:
    """The repository's files (not the agent's own) it wrote whole and that are still active (a chunk of each above
    the threshold), or read whole in its last READ_WHOLE_FOR operations, the latest first, while they fit
    `memory.whole_file_chars` together: what the agent may write anew from memory, shown whole. Then, in the room
    left, those it read through in pieces: their active chunks, beside the budget."""
    room, view, params = ctx.settings.memory.whole_file_chars, ctx.codebase.view, ctx.score_params
    chunks = scored(state.get("code_context", []), state.get("n_operations", 0), params)
    active = [chunk for chunk in chunks if chunk.activity.score > params.threshold]
    live, created = {chunk.file_path for chunk in active}, {chunk.file_path for chunk in chunks if chunk.created}
    nodes = state.get("operations", [])[-WHOLE_HORIZON:]
    named = [path for age, node in enumerate(reversed(nodes)) for path in whole_named(ctx, node, age < READ_WHOLE_FOR)]
    through = read_through(ctx, active)
    found: tuple[list[str], list[str]] = ([], [])
    for path in dict.fromkeys([*named, *through]):
        if path not in live or path in created:
            continue
        lines, whole = view.lines(path) or [], path in named
        seen = range(1, len(lines) + 1) if whole else sorted(i for i in through[path] if i <= len(lines))
        size = sum(len(lines[i - 1]) + ROW_CHARS for i in seen)
        if size > room:
            break
        found[0 if whole else 1].append(path)
        room -= size
    return found


def read_through(ctx: AgentContext, active: list[Chunk]) -> dict[str, set[int]]:
    """The files whose active chunks hold `memory.read_through` of their lines (read through in pieces: `head`,
    then `sed -n` range after range), the most active first, with those lines."""
    share, view = ctx.settings.memory.read_through, ctx.codebase.view
    if not share:
        return {}
    at_most: dict[str, int] = {}  # the lines of a file's chunks, overlaps counted twice: most files fall short of it
    for chunk in active:
        at_most[chunk.file_path] = at_most.get(chunk.file_path, 0) + len(chunk.lines)
    needed = {path: share * (view.line_count(path) or 1) for path in at_most}
    seen: dict[str, set[int]] = {}
    for chunk in sorted(active, key=lambda chunk: chunk.activity.score, reverse=True):
        if at_most[chunk.file_path] >= needed[chunk.file_path]:
            seen.setdefault(chunk.file_path, set()).update(chunk.lines)
    return {path: lines for path, lines in seen.items() if len(lines) >= needed[path]}


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def briefs(ctx: AgentContext, nodes: list[OperationNode], following: list[OperationNode]) -> list[str]:
    """Each node in brief (thought and action cut short, its summary unless the next node's thought begins with it)."""
    memory = ctx.settings.memory
    limits = memory.history_thought_chars, memory.history_params_chars
    parts = []
    for node, after, text in zip(nodes, following, params_texts(ctx.memo, nodes), strict=False):
        key = ("brief", node.id, node.action_type, node.thought, text, node.summary, after.thought, limits)
        parts.append(ctx.memo.get(key, partial(brief, ctx, node, text, after)))  # (key: all `brief` reads)
    return parts


def brief(ctx: AgentContext, node: OperationNode, text: str, after: OperationNode) -> str:
    thought = clip(node.thought, ctx.settings.memory.history_thought_chars)
    params = clip(text, ctx.settings.memory.history_params_chars)
    summary = "" if node.summary == first_sentence(after.thought) else node.summary or "(none)"
    return render(ctx.templates, "operation_brief", node=node, thought=thought, params=params, summary=summary)


def history_text(ctx: AgentContext, chain: list[OperationNode], count: int) -> str:
    """The first `count` nodes of the reasoning chain (those before the recent operations); past `history_max` nodes
    the oldest are only counted, half of the maximum at a time."""
    if not count:
        return render(ctx.templates, "operation_history_empty")
    limit = ctx.settings.memory.history_max
    block = max(1, limit // 2)
    omitted = -(-(count - limit) // block) * block if count > limit else 0
    parts = [render(ctx.templates, "operations_omitted", count=omitted)] if omitted else []
    return "\n\n".join([*parts, *briefs(ctx, chain[omitted:count], chain[omitted + 1 :])])


def recent_text(ctx: AgentContext, recent: list[OperationNode], shown_text: str) -> str:
    """The last operations of the chain as they ran: thought, action, observation (its rows the snapshot shows left
    out); the last one is the latest."""
    parts, rows = [], set(shown_text.split("\n"))
    for node, params in zip(recent, params_texts(ctx.memo, recent), strict=True):
        observation = rows_elided(node.observation, rows, ctx.templates, context=True)
        shown = replace(node, observation=observation)
        parts.append(render(ctx.templates, "operation", node=shown, params=params, latest=node is recent[-1]))
    return "\n".join(parts)


def files_named(ctx: AgentContext, nodes: list[OperationNode], known: list[str]) -> list[str]:
    """`known`, then the repository's files that the operations' actions and outputs named (those that exist), in
    first-seen order."""
    texts = zip(params_texts(ctx.memo, nodes), (node.observation for node in nodes), strict=True)
    named = paths_named([text for pair in texts for text in pair], ctx.codebase.env.workdir)
    return list(dict.fromkeys([*known, *ctx.codebase.view.existing(path for path in named if path not in known)]))


def lessons_of(state: AgentState) -> list[str]:
    return list(dict.fromkeys([*state.get("carried_lessons", []), *all_lessons(state.get("operations", []))]))


def split(ctx: AgentContext, state: AgentState) -> tuple[list[OperationNode], list[OperationNode]]:
    """The reasoning chain's history (before the recent operations) and its recent operations."""
    chain = reasoning_chain(state.get("operations", []))
    recent = chain[-ctx.settings.memory.recent_operations :] if chain else []
    return chain[: len(chain) - len(recent)], recent


@dataclass(frozen=True)
class Reading:
    """What the renders of one state read alike (the renewal rule's two): each once, when first asked, as before."""

    ctx: AgentContext
    state: AgentState

    @cached_property
    def split(self) -> tuple[list[OperationNode], list[OperationNode]]:
        return split(self.ctx, self.state)

    @cached_property
    def lessons(self) -> list[str]:
        return lessons_of(self.state)

    @cached_property
    def changes(self) -> str:
        return tracked_diff(self.state.get("worktree_patch", ""))

    @cached_property
    def whole(self) -> tuple[list[str], list[str]]:
        return whole_files(self.ctx, self.state)


def base(now: Reading, previous: MemoryBase | None = None) -> MemoryBase:
    """The base of a full renewal: everything the memory holds now but the recent operations (the files named read
    from the operations since the `previous` base only)."""
    ctx, state = now.ctx, now.state
    (history, recent), nodes = now.split, state.get("operations", [])
    step = state.get("n_operations", 0)
    files = files_named(ctx, nodes[previous["step"] :], previous["files"]) if previous else files_named(ctx, nodes, [])
    parts = {
        "lessons": "\n".join(f"- {lesson}" for lesson in now.lessons) or render(ctx.templates, "lessons_empty"),
        "files": ", ".join(files),
        "operation_history": history_text(ctx, [*history, *recent], len(history)),
        "changes": now.changes,
        "code_context": code_context_text(ctx, state.get("code_context", []), step, whole=now.whole),
    }
    preface = ctx.variants.prompt(ctx, state).preface  # e.g. a plan, ahead of the memory
    text = render(ctx.templates, "memory_base", step=step, preface=preface, **capped(ctx, parts))
    return MemoryBase(
        text=text,
        step=step,
        history=len(history),
        lessons=now.lessons,
        files=files,
        changes=now.changes,
        since=0,
        held=0.0,
        first=0,  # the ledger's figures: the renewal rule's (render_context)
        balance=0.0,
    )


def since_text(now: Reading, kept: MemoryBase) -> str:
    """What the memory holds beyond the base `kept`: empty when nothing is new."""
    ctx, state = now.ctx, now.state
    history, recent = now.split
    chain = [*history, *recent]
    step = state.get("n_operations", 0)
    changes = changed_sections(ctx, kept["changes"], now.changes)
    new_files = files_named(ctx, state.get("operations", [])[kept["step"] :], kept["files"])[len(kept["files"]) :]
    rows = lambda: frozenset(row for row in kept["text"].split("\n") if ROW.match(row))  # noqa: E731
    hide = ctx.memo.get(("rows", kept["text"]), rows)  # the base's numbered rows, found once per base
    parts = {
        "operation_history": "\n\n".join(briefs(ctx, history[kept["history"] :], chain[kept["history"] + 1 :])),
        "lessons": "\n".join(f"- {lesson}" for lesson in now.lessons if lesson not in kept["lessons"]),
        "files": ", ".join(new_files),
        "changes": changes,
        "code_context": code_context_text(ctx, state.get("code_context", []), step, hide, kept["step"], now.whole),
    }
    if not any(parts.values()):
        return ""
    return render(ctx.templates, "memory_since", base_step=kept["step"], step=step, **capped(ctx, parts))


def changed_sections(ctx: AgentContext, before: str, now: str) -> str:
    """The sections of the diff `now` that differ from those of `before`, and a line for each file put back."""
    old, new = sections(before), sections(now)
    parts = [f"diff --git {section}" for path, section in new.items() if old.get(path) != section]
    parts += [render(ctx.templates, "change_undone", path=path) for path in old if path not in new]
    return "\n".join(parts)


def compose(now: Reading, kept: MemoryBase) -> tuple[str, int]:
    """The snapshot on the base `kept` (the base, what came since, the recent operations), and the length of what
    came since."""
    ctx = now.ctx
    since = since_text(now, kept) if now.state.get("n_operations", 0) > kept["step"] else ""
    _, recent = now.split
    latest = recent_text(ctx, recent, kept["text"] + since) if recent else ""
    latest = capped(ctx, {"latest": latest})["latest"]
    return render(ctx.templates, "snapshot", base=kept["text"], since=since, latest=latest), len(since)
