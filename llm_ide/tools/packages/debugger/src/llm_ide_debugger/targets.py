"""What `debugger start` runs: a script, a module (`-m name`), or pytest (node ids `tests/test_x.py::test_y`)."""

import ast
import os
import re

PYTEST_PLUGIN = "llm_ide_debugger.pytest_plugin"


class TargetError(ValueError):
    pass


def is_test_file(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def parse_target(words: "list[str]", force_pytest: bool = False) -> dict:
    """{"kind": "script"|"module", "name": path or module, "argv": sys.argv for it, "pytest_ids": [...]}."""
    if not words:
        raise TargetError("no target: give a script path, `-m module`, or a pytest node id (tests/test_x.py::test_y)")
    if words[:2] in (["python", "-m"], ["python3", "-m"]):
        words = words[1:]
    if words[0] == "pytest" or words[:2] == ["-m", "pytest"]:
        args = words[1:] if words[0] == "pytest" else words[2:]
        return pytest_target(args)
    if words[0] == "-m":
        if len(words) < 2:
            raise TargetError("`-m` needs a module name")
        return {"kind": "module", "name": words[1], "argv": [words[1]] + words[2:], "pytest_ids": []}
    if force_pytest or "::" in words[0] or is_test_file(words[0]):
        return pytest_target(words)
    if not os.path.isfile(words[0]):
        raise TargetError(f"no such script: {words[0]}")
    return {"kind": "script", "name": words[0], "argv": list(words), "pytest_ids": []}


def pytest_target(args: "list[str]") -> dict:
    node_ids = [arg for arg in args if not arg.startswith("-") and ("::" in arg or arg.endswith(".py"))]
    argv = ["pytest", "-p", PYTEST_PLUGIN] + list(args)
    return {"kind": "module", "name": "pytest", "argv": argv, "pytest_ids": node_ids}


def _is_docstring(statement: ast.stmt) -> bool:
    value = getattr(statement, "value", None)
    text = getattr(value, "value", None) if type(value).__name__ == "Constant" else getattr(value, "s", None)
    return isinstance(statement, ast.Expr) and isinstance(text, str)


def _first_statement_line(function: "ast.FunctionDef | ast.AsyncFunctionDef") -> int:
    body = function.body
    return body[1].lineno if len(body) > 1 and _is_docstring(body[0]) else body[0].lineno


def _find(scope: "list[ast.stmt]", name: str) -> "ast.AST | None":
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
    return None


def test_entry_lines(node_id: str, root: str) -> "list[tuple[str, int]]":
    """(absolute file, first body line) of the test a node id selects (the first one for a file or a class)."""
    path, _, rest = node_id.partition("::")
    filename = os.path.abspath(os.path.join(root, path))
    try:
        with open(filename, "rb") as handle:
            tree = ast.parse(handle.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return []
    names = [re.sub(r"\[.*\]$", "", part) for part in rest.split("::")] if rest else []
    scope = tree.body
    node = None
    for name in names:
        node = _find(scope, name)
        if node is None:
            return []
        scope = getattr(node, "body", [])
    functions = [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    if not functions:
        functions = [
            item
            for item in (scope if node is not None else _module_tests(tree))
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
        ]
    return [(filename, _first_statement_line(function)) for function in functions[:1]]


def _module_tests(tree: ast.Module) -> "list[ast.stmt]":
    found = []
    for item in tree.body:
        if isinstance(item, ast.ClassDef) and item.name.startswith("Test"):
            found.extend(item.body)
        else:
            found.append(item)
    return found
