"""Which Python files import a module, by every form an import takes: `import pkg.mod`, `import pkg.mod as m`,
`from pkg import mod`, `from pkg.mod import x`, parenthesised imports over several lines, and relative imports
(`from . import mod`, `from .mod import x`, `from .. import mod`) resolved against the importing file's package.
Pure functions over paths and source text; a file Python cannot parse (Python 2 syntax) is read by a pattern."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import PurePosixPath

FROM_IMPORT = re.compile(r"^\s*from\s+(\.*[\w.]*)\s+import\s+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)
PLAIN_IMPORT = re.compile(r"^\s*import\s+([^\n#;]+)", re.MULTILINE)


def package_parts(directory: PurePosixPath, python_files: set[str]) -> tuple[str, ...] | None:
    """The dotted package a directory is (its chain of folders holding `__init__.py`, from the top one down);
    None when the directory itself is no package."""
    parts: list[str] = []
    while directory.name and str(directory / "__init__.py") in python_files:
        parts.insert(0, directory.name)
        directory = directory.parent
    return tuple(parts) if parts else None


def module_names(path: str, python_files: set[str]) -> set[str]:
    """The names a source file is imported by: `src/pkg/sub/mod.py` in packages `pkg.sub` is `pkg.sub.mod` (and
    `src/pkg/sub/__init__.py` is `pkg.sub`); a file
    outside any package (a top-level module, a namespace package) is any of its path's dotted tails, since which
    folder is on `sys.path` cannot be told."""
    file = PurePosixPath(path)
    own = [] if file.stem == "__init__" else [file.stem]  # a package's `__init__.py` is the package
    package = package_parts(file.parent, python_files)
    if package is not None:
        return {".".join([*package, *own])}
    parts = [*file.parent.parts, *own]
    return {".".join(parts[start:]) for start in range(len(parts))}


def resolved(module: str, level: int, importer: str, python_files: set[str]) -> str:
    """An import's module made absolute: relative ones (level > 0) against the importing file's package (its
    folders when it is in none)."""
    if not level:
        return module
    folder = PurePosixPath(importer).parent
    base = list(package_parts(folder, python_files) or folder.parts)
    base = base[: max(0, len(base) - level + 1)]
    return ".".join([*base, *([module] if module else [])])


def imported_names(source: str, importer: str, python_files: set[str]) -> set[str]:
    """Every dotted name the file's imports reach: `from a.b import c` reaches `a.b` and `a.b.c` (c may be a module)."""
    names: set[str] = set()
    for module, level, members in import_statements(source):
        if module is None:
            names.update(members)
            continue
        base = resolved(module, level, importer, python_files)
        if base:
            names.add(base)
        names.update(f"{base}.{member}" if base else member for member in members if member != "*")
    return names


def import_statements(source: str) -> Iterable[tuple[str | None, int, list[str]]]:
    """(module, level, names) per import statement; `import a.b` is (None, 0, ["a.b"])."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        yield from statements_by_pattern(source)
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield None, 0, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level, [alias.name for alias in node.names]


def statements_by_pattern(source: str) -> Iterable[tuple[str | None, int, list[str]]]:
    for module, members in FROM_IMPORT.findall(source):
        dots = len(module) - len(module.lstrip("."))
        yield module[dots:], dots, [word.split()[0] for word in members.strip("()").split(",") if word.split()]
    for members in PLAIN_IMPORT.findall(source):
        yield None, 0, [word.split()[0] for word in members.split(",") if word.split()]


def imports_any(source: str, importer: str, modules: set[str], python_files: set[str]) -> bool:
    """Whether the file imports one of `modules` (or something inside one)."""
    reached = imported_names(source, importer, python_files)
    return any(name == module or name.startswith(module + ".") for name in reached for module in modules)
