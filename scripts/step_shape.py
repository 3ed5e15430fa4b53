"""The step's own figures (scripts/architecture.py prints them with the others):

- format reads: the places outside the exchange (`exchange.py`; the settings' own `with_tools` aside) that read how a
  run talks to its model: `agent.single_call`, `model.action_format`, the context's `tools` flag (`ctx.tools`), the
  tool format's templates (`with_tools`, `tool_format`);
- tool-call tags: lines of the package (Python and YAML) that write or read a tool call as a `<tool_call …>` text tag;
- verdict files: the files of the agent (the trajectory's readers apart: `inspector/`, `replay/`, `cli/`) that read or
  write an operation's verdict itself: its fields (`bad_action`, `judged_when_run`), the step's `judged` channel, or
  the helpers that did (`verdict_due`, `with_reflection`, `Reflection`, `joins_verdict`);
- scripted mentions: the places outside the model modules (`models.py`, `scripted.py`) that know a scripted model
  and its position: the class, its script's joining, the call counts kept for it (`saved_calls`, `merge_calls`,
  `policy.restore`, a `calls` channel of the run's state);
- untyped contexts: parameters named `ctx` annotated `Any`;
- context writes: assignments to a field of a run's context (`ctx.<field> = …`, `ctx.<field>[…] = …`);
- status aliases: exit statuses that share their value with another.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from code_shape import Parse, parse

PACKAGE = "llm_ide"
SKIPPED = ("tools/packages/", "demo/")
READERS = ("inspector/", "replay/", "cli/")
UNRELATED = ("coop/",)  # coop's `bad_action` is its planner's refusal message, not an operation's verdict
FORMAT_ATTRIBUTES = {"with_tools", "tool_format"}
SETTING_READS = {"single_call": "agent", "action_format": "model"}  # a setting read: its section, then the key
EXCHANGE = ("exchange.py", "settings.py")
VERDICT_NAMES = {"bad_action", "judged_when_run", "judged", "verdict_due", "with_reflection", "Reflection"}
VERDICT_NAMES |= {"joins_verdict"}
SCRIPTED_NAMES = {"ScriptedModel", "joined_script", "saved_calls", "merge_calls"}
TAG = re.compile(r"</?tool_call\b")


def sources(root: Path, suffix: str = ".py") -> dict[str, Path]:
    package = root / PACKAGE
    found = {p.relative_to(package).as_posix(): p for p in sorted(package.rglob(f"*{suffix}"))}
    return {name: path for name, path in found.items() if not name.startswith(SKIPPED)}


def names_in(node: ast.AST) -> str | None:
    """The name a node spells: a variable, an attribute, a keyword, a parameter, a definition, a string key."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.keyword | ast.arg):
        return node.arg
    if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
        return node.name
    if isinstance(node, ast.alias):
        return node.asname or node.name.rsplit(".", 1)[-1]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def is_ctx(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "ctx") or (isinstance(node, ast.Attribute) and node.attr == "ctx")


def is_format_read(node: ast.AST) -> bool:
    if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
        return False
    setting = node.attr in SETTING_READS and SETTING_READS[node.attr] == getattr(node.value, "attr", None)
    return setting or node.attr in FORMAT_ATTRIBUTES or (node.attr == "tools" and is_ctx(node.value))


Nodes = dict[str, list[ast.AST]]  # every node of each file, walked once


def format_reads(nodes: Nodes, exchange: tuple[str, ...] = EXCHANGE) -> list[tuple[str, int]]:
    return sorted(
        (name, node.lineno)
        for name, walked in nodes.items()
        if name not in exchange
        for node in walked
        if is_format_read(node)
    )


def tool_call_tags(root: Path) -> list[tuple[str, int]]:
    files = {**sources(root), **sources(root, ".yaml")}
    return [
        (name, number)
        for name, path in files.items()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TAG.search(line)
    ]


def verdict_files(nodes: Nodes) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, walked in nodes.items():
        if name.startswith(READERS + UNRELATED):
            continue
        used = sorted({spelt for node in walked if (spelt := names_in(node)) in VERDICT_NAMES})
        if used:
            found[name] = used
    return found


def scripted_mentions(nodes: Nodes) -> list[tuple[str, int, str]]:
    found = []
    for name, walked in nodes.items():
        if name in ("models.py", "scripted.py", "script_file.py"):  # the scripted model's own
            continue
        for node in walked:
            spelt = names_in(node) if not isinstance(node, ast.Constant) else None
            restore = isinstance(node, ast.Attribute) and node.attr in ("restore", "calls")
            restore = restore and "policy" in (getattr(node.value, "attr", ""), getattr(node.value, "id", ""))
            channel = name == "state/graph_state.py" and isinstance(node, ast.AnnAssign)
            channel = channel and getattr(getattr(node, "target", None), "id", "") == "calls"
            if spelt in SCRIPTED_NAMES or restore or channel:
                found.append((name, node.lineno, f"policy.{spelt}" if restore else spelt or "calls channel"))
    return sorted(set(found))


def untyped_contexts(nodes: Nodes) -> list[tuple[str, int]]:
    return sorted(
        (name, node.lineno)
        for name, walked in nodes.items()
        for node in walked
        if isinstance(node, ast.arg)
        and node.arg == "ctx"
        and isinstance(node.annotation, ast.Name)
        and node.annotation.id == "Any"
    )


def context_writes(nodes: Nodes) -> list[tuple[str, int]]:
    found = []
    for name, walked in nodes.items():
        for node in walked:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            for target in targets:
                inner = target.value if isinstance(target, ast.Subscript) else target
                if isinstance(inner, ast.Attribute) and is_ctx(inner.value):
                    found.append((name, node.lineno))
    return sorted(found)


def status_aliases(root: Path) -> list[str]:
    text = (root / PACKAGE / "errors.py").read_text(encoding="utf-8")
    body = text[text.index("class ExitStatus") : text.index("@property")]
    members = re.findall(r'^\s+([A-Z_]+) = \(?\s*"([a-z_]+)"', body, re.MULTILINE)
    values = [value for _, value in members]
    return sorted(member for member, value in members if values.count(value) > 1)


@dataclass
class StepShape:
    format_reads: list[tuple[str, int]]
    tool_call_tags: list[tuple[str, int]]
    verdict_files: dict[str, list[str]]
    scripted_mentions: list[tuple[str, int, str]]
    untyped_contexts: list[tuple[str, int]]
    context_writes: list[tuple[str, int]]
    status_aliases: list[str]

    def figures(self) -> dict[str, int]:
        return {
            "format_reads": len(self.format_reads),
            "tool_call_tags": len(self.tool_call_tags),
            "verdict_files": len(self.verdict_files),
            "scripted_mentions": len(self.scripted_mentions),
            "untyped_contexts": len(self.untyped_contexts),
            "context_writes": len(self.context_writes),
            "status_aliases": len(self.status_aliases),
        }

    def details(self) -> list[str]:
        lines = [f"  format   {path}:{line}" for path, line in self.format_reads]
        lines += [f"  tag      {path}:{line}" for path, line in self.tool_call_tags]
        lines += [f"  verdict  {path}: {', '.join(names)}" for path, names in self.verdict_files.items()]
        lines += [f"  scripted {path}:{line} {what}" for path, line, what in self.scripted_mentions]
        lines += [f"  ctx: Any {path}:{line}" for path, line in self.untyped_contexts]
        lines += [f"  ctx write {path}:{line}" for path, line in self.context_writes]
        lines += [f"  status alias {member}" for member in self.status_aliases]
        return lines


def measure_step(root: Path, parse: Parse = parse) -> StepShape:
    nodes = {name: list(ast.walk(parse(path))) for name, path in sources(root).items()}
    return StepShape(
        format_reads(nodes),
        tool_call_tags(root),
        verdict_files(nodes),
        scripted_mentions(nodes),
        untyped_contexts(nodes),
        context_writes(nodes),
        status_aliases(root),
    )


if __name__ == "__main__":
    shape = measure_step(Path(__file__).resolve().parents[1])
    print("\n".join(shape.details()))
    print("RESULT " + " ".join(f"{key}={value}" for key, value in shape.figures().items()))
