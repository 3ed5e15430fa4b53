"""The package's shape beyond its imports, counted (scripts/architecture.py prints them with the import figures):

- long functions: functions (decorators to last line) over 60 lines;
- fmt skips: `# fmt: skip` lines;
- status files: files that decide an exit status: an `ExitStatus.<MEMBER>` used as a value (assigned, returned,
  passed, stored; not compared, not a lookup key), or a text stored as an `exit_status`;
- reading path: the files whose code runs in one step, as docs/architecture.md lists them (scripts/reading_path.py
  traces a step and writes the list), and their lines;
- the variant protocol: the members of `llm_ide.variant.Variant`, and for each the bundled variants that implement it
  (`name` and the members nothing implements but the core's default are listed apart).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "llm_ide"
SKIPPED = ("tools/packages/", "demo/")
LONG_FUNCTION = 60
STATUS_KEYS = {"exit_status"}
BUNDLED_VARIANTS = ("navigator/variant.py", "reproduction/variant.py", "sampling/variant.py", "messages/variant.py")
READING_PATH = re.compile(r"<!-- reading path -->(.*?)<!-- /reading path -->", re.DOTALL)


Parse = Callable[[Path], ast.Module]


def parse(path: Path) -> ast.Module:
    """A file's syntax tree. The measures read the same files: scripts/architecture.py parses each once for its run
    (`lru_cache(parse)`, dropped after it: the package's trees are ~350,000 objects a test's process would walk)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def package_files(root: Path) -> dict[str, Path]:
    package = root / PACKAGE
    found = {p.relative_to(package).as_posix(): p for p in sorted(package.rglob("*.py"))}
    return {name: path for name, path in found.items() if not name.startswith(SKIPPED)}


def long_functions(trees: dict[str, ast.Module]) -> list[tuple[str, str, int]]:
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - start + 1
                if size > LONG_FUNCTION:
                    found.append((name, node.name, size))
    return sorted(found)


def statuses(root: Path) -> set[str]:
    text = (root / PACKAGE / "errors.py").read_text(encoding="utf-8")
    body = text[text.index("class ExitStatus") : text.index("@property")]
    return set(re.findall(r'^\s+[A-Z_]+ = \(?\s*"([a-z_]+)"', body, re.MULTILINE))


class StatusUses(ast.NodeVisitor):
    """The places a status is decided: `ExitStatus.X` outside a comparison or a lookup key, a text stored as an
    `exit_status` (a dict's key, a keyword, a variable)."""

    def __init__(self, known: set[str]) -> None:
        self.known, self.found, self.shielded = known, [], set()

    def visit_Compare(self, node: ast.Compare) -> None:
        self.shielded.update(id(child) for child in ast.walk(node))
        self.generic_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        self.shielded.update(id(child) for child in ast.walk(node))

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if key is not None:
                self.shielded.update(id(child) for child in ast.walk(key))
            if isinstance(key, ast.Constant) and key.value in STATUS_KEYS:
                self.literal(value)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg in STATUS_KEYS:
            self.literal(node.value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id in STATUS_KEYS for t in node.targets):
            self.literal(node.value)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        named = isinstance(node.value, ast.Name) and node.value.id == "ExitStatus" and node.attr.isupper()
        if named and id(node) not in self.shielded:
            self.found.append(node.lineno)
        self.generic_visit(node)

    def literal(self, value: ast.AST) -> None:
        """A status's text, or any text, stored under a status key (a status outside the enum is one too)."""
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
            self.found.append(value.lineno)


def status_files(trees: dict[str, ast.Module], known: set[str]) -> dict[str, list[int]]:
    files = {}
    for name, tree in trees.items():
        visitor = StatusUses(known)
        visitor.visit(tree)
        if visitor.found:
            files[name] = sorted(visitor.found)
    return files


def reading_path(root: Path) -> dict[str, int]:
    """The files docs/architecture.md lists between its reading-path markers, with their lines."""
    found = READING_PATH.search((root / "docs" / "architecture.md").read_text(encoding="utf-8"))
    if found is None:
        return {}
    files = re.findall(r"^\d+\. `(llm_ide/[\w/]+\.py)`", found.group(1), re.MULTILINE)
    return {name: len((root / name).read_text(encoding="utf-8").splitlines()) for name in dict.fromkeys(files)}


def members(cls: ast.ClassDef) -> list[str]:
    names = []
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            names.append(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.append(item.target.id)
        elif isinstance(item, ast.Assign):
            names += [target.id for target in item.targets if isinstance(target, ast.Name)]
    return names


def protocol(trees: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Each member of `Variant` and the bundled variants that implement it."""
    base = next(n for n in trees["variant.py"].body if isinstance(n, ast.ClassDef) and n.name == "Variant")
    users: dict[str, list[str]] = {member: [] for member in members(base)}
    for module in BUNDLED_VARIANTS:
        for cls in trees[module].body:
            bases = {b.id for b in getattr(cls, "bases", []) if isinstance(b, ast.Name)}
            if isinstance(cls, ast.ClassDef) and "Variant" in bases:
                for member in set(members(cls)) & set(users):
                    users[member].append(cls.name)
    return {member: sorted(names) for member, names in users.items()}


@dataclass
class Shape:
    long_functions: list[tuple[str, str, int]]
    fmt_skips: list[tuple[str, int]]
    status_files: dict[str, list[int]]
    reading_path: dict[str, int]
    protocol: dict[str, list[str]]

    def figures(self) -> dict[str, int]:
        return {
            "long_functions": len(self.long_functions),
            "fmt_skips": len(self.fmt_skips),
            "status_files": len(self.status_files),
            "reading_path_files": len(self.reading_path),
            "reading_path_lines": sum(self.reading_path.values()),
            "protocol_members": len(self.protocol),
            "protocol_members_used_once": sum(1 for users in self.protocol.values() if len(users) < 2),
        }


def measure_shape(root: Path, parse: Parse = parse) -> Shape:
    files = package_files(root)
    texts = {name: path.read_text(encoding="utf-8") for name, path in files.items()}
    trees = {name: parse(path) for name, path in files.items()}
    skips = [
        (name, number)
        for name, text in texts.items()
        for number, line in enumerate(text.splitlines(), 1)
        if "# fmt: skip" in line
    ]
    return Shape(
        long_functions(trees),
        skips,
        status_files(trees, statuses(root)),
        reading_path(root),
        protocol(trees),
    )
