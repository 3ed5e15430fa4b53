"""The package's import graph, which scripts/architecture.py counts against its targets: each module's imports of the
package read from its syntax tree (those inside a function apart), a module's layer in the layer table, the circles
(Tarjan's algorithm), the arrows back up a layer, and the same one level up, each folder of the package a node."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from code_shape import Parse, parse

PACKAGE = "llm_ide"
SKIPPED = ("tools/packages/", "demo/")


@dataclass
class Module:
    name: str  # llm_ide.run.single
    path: str  # run/single.py, relative to the package
    imports: set[str] = field(default_factory=set)
    local: list[tuple[int, str]] = field(default_factory=list)  # (line, imported module) inside a function


def module_name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def resolve(names: set[str], module: str, level: int, current: str, is_package: bool, imported: list[str]) -> list[str]:
    """The package's modules an import statement reaches (`from x import y`: x.y when it is a module, else x)."""
    if level:
        base = current.split(".") if is_package else current.split(".")[:-1]
        base = base[: len(base) - level + 1]
        module = ".".join([*base, *([module] if module else [])])
    if not module.startswith(PACKAGE):
        return []
    found = [f"{module}.{name}" for name in imported if f"{module}.{name}" in names]
    return found or ([module] if module in names else [])


class Imports(ast.NodeVisitor):
    def __init__(self, module: Module, names: set[str], is_package: bool) -> None:
        self.module, self.names, self.is_package, self.depth = module, names, is_package, 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def add(self, line: int, targets: list[str]) -> None:
        for target in targets:
            if target != self.module.name:
                self.module.imports.add(target)
                if self.depth:
                    self.module.local.append((line, target))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(node.lineno, resolve(self.names, alias.name, 0, self.module.name, self.is_package, []))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        imported = [alias.name for alias in node.names]
        targets = resolve(self.names, node.module or "", node.level, self.module.name, self.is_package, imported)
        self.add(node.lineno, targets)


def read_package(root: Path, parse: Parse = parse) -> dict[str, Module]:
    package = root / PACKAGE
    files = sorted(p for p in package.rglob("*.py") if not p.relative_to(package).as_posix().startswith(SKIPPED))
    modules = {module_name(p.relative_to(package)): p for p in files}
    found: dict[str, Module] = {}
    for name, path in modules.items():
        module = Module(name, path.relative_to(package).as_posix())
        Imports(module, set(modules), path.name == "__init__.py").visit(parse(path))
        found[name] = module
    return found


def layer_of(path: str, layers: list[tuple[str, tuple[str, ...]]]) -> int:
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (path == prefix or path.startswith(prefix) and prefix.endswith("/")) and len(prefix) > length:
                best, length = index, len(prefix)
    if best < 0:
        raise SystemExit(f"{PACKAGE}/{path}: on no layer; add it to LAYERS in architecture.py")
    return best


def circles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(modules[target].imports))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


@dataclass
class Counts:
    variant_names: list[str]  # at the composition point
    variant_mentions: list[tuple[str, int, str]]  # (file, line, word) elsewhere in the core
    local_imports: list[tuple[str, int, str]]
    arrows_up: list[tuple[str, str]]
    circles: list[list[str]]
    folder_circles: list[list[str]] = field(default_factory=list)
    folder_arrows_up: list[tuple[str, str]] = field(default_factory=list)
    split_folders: list[str] = field(default_factory=list)  # folders whose modules the layer table splits

    def figures(self) -> dict[str, int]:
        return {
            "variant_names": len(self.variant_names),
            "variant_mentions_elsewhere": len(self.variant_mentions),
            "local_imports": len(self.local_imports),
            "arrows_up": len(self.arrows_up),
            "circles": len(self.circles),
            "folder_circles": len(self.folder_circles),
            "folder_arrows_up": len(self.folder_arrows_up),
            "split_folders": len(self.split_folders),
        }


def in_core(path: str, core: tuple[str, ...]) -> bool:
    return any(path == prefix or (prefix.endswith("/") and path.startswith(prefix)) for prefix in core)


def folder_of(path: str) -> str:
    """A module's folder at the package's top (`run` for run/single.py), or the module itself (`graph`)."""
    return path.split("/", 1)[0].removesuffix(".py")


def folder_level(counts: Counts, modules: dict[str, Module], layers: list[tuple[str, tuple[str, ...]]]) -> Counts:
    """The same structure one level up: each folder a node, an import between two folders an arrow; a folder whose
    modules sit on different layers is counted (it would hide its arrows), and takes its lowest module's layer."""
    by_name = {m.name: m for m in modules.values()}
    folders: dict[str, Module] = {}
    levels: dict[str, set[int]] = {}
    for module in modules.values():
        name = folder_of(module.path)
        folder = folders.setdefault(name, Module(name, name))
        folder.imports |= {folder_of(by_name[target].path) for target in module.imports} - {name}
        levels.setdefault(name, set()).add(layer_of(module.path, layers))
    layer = {name: min(found) for name, found in levels.items()}
    counts.folder_circles = circles(folders)
    counts.folder_arrows_up = sorted(
        (name, target) for name, folder in folders.items() for target in folder.imports if layer[name] < layer[target]
    )
    counts.split_folders = sorted(name for name, found in levels.items() if len(found) > 1)
    return counts
