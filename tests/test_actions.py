from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, make_git_repo

from llm_ide.actions import execute_action
from llm_ide.codebase import Codebase
from llm_ide.codeview import CodeView
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.state.context import Scope
from llm_ide.workspace.patch import extract_patch

SOURCE = (
    "import os\n"
    "\n"
    "\n"
    "class Greeter:\n"
    "    def hello(self, name):\n"
    "        return f'hello {name}'\n"
    "\n"
    "    def bye(self, name):\n"
    "        return f'bye {name}'\n"
    "\n"
    "\n"
    "def main():\n"
    "    print(Greeter().hello('x'))\n"
)


@pytest.fixture
def ws(tmp_path: Path) -> Codebase:
    repo = make_git_repo(
        tmp_path / "repo", {"app/greet.py": SOURCE, "README.md": "".join(f"line {n}\n" for n in range(1, 31))}
    )
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    return Codebase(
        env=env,
        view=CodeView(env),
        templates=load_config("default").templates,
        view_max_lines=5,
        tool_commands=("navigator",),
    )


def test_view_caps_the_window_and_splits_accessed_code_per_scope(ws: Codebase) -> None:
    outcome = execute_action(ws, "view", {"path": "./app/greet.py", "start_line": 4, "end_line": 40})
    assert outcome.observation.splitlines() == [
        "app/greet.py (13 lines), lines 4-8:",
        "     4\tclass Greeter:",
        "     5\t    def hello(self, name):",
        "     6\t        return f'hello {name}'",
        "     7\t",
        "     8\t    def bye(self, name):",
    ]
    assert outcome.accessed == [
        Scope("app/greet.py", (4, 7), "Greeter", ""),
        Scope("app/greet.py", (5, 6), "Greeter", "hello"),
        Scope("app/greet.py", (8,), "Greeter", "bye"),
    ]
    tail = execute_action(ws, "view", {"path": "README.md", "start_line": 28})  # (the file ends with a newline)
    assert tail.observation.splitlines() == [
        "README.md (30 lines), lines 28-30:",
        *(f"{n:>6}\tline {n}" for n in (28, 29, 30)),
    ]
    assert execute_action(ws, "view", {"path": "nope.py"}).returncode == 1
    bad = execute_action(ws, "view", {"path": "../etc/passwd"})
    assert (bad.returncode, bad.accessed) == (2, [])
    assert "outside the repository" in bad.observation


def test_view_symbol_gives_a_whole_function_chunk(ws: Codebase) -> None:
    outcome = execute_action(ws, "view_symbol", {"path": "app/greet.py", "symbol": "Greeter.bye"})
    assert outcome.observation.splitlines() == [
        "app/greet.py:8-9 (Greeter.bye):",
        "     8\t    def bye(self, name):",
        "     9\t        return f'bye {name}'",
    ]
    assert outcome.accessed == [Scope("app/greet.py", (8,), "Greeter", "bye", whole_function=True)]
    missing = execute_action(ws, "view_symbol", {"path": "app/greet.py", "symbol": "Greeter.nope"})
    assert missing.returncode == 1 and "Definitions there: Greeter, bye, hello, main" in missing.observation


@pytest.mark.parametrize(
    ("old", "expected"),
    [
        ("return f'nothing'", "No change: `old` does not occur in app/greet.py"),
        ("name}'\n", "No change: `old` occurs 2 times in app/greet.py (lines 6, 9)"),
    ],
)
def test_edit_refuses_zero_or_several_matches(ws: Codebase, old: str, expected: str) -> None:
    outcome = execute_action(ws, "edit", {"path": "app/greet.py", "old": old, "new": "x"})
    assert (outcome.returncode, outcome.accessed) == (1, [])
    assert outcome.observation.startswith(expected)
    assert (Path(ws.env.workdir) / "app/greet.py").read_text() == SOURCE


def test_edit_replaces_one_occurrence_and_shows_the_region(ws: Codebase) -> None:
    params = {"path": "app/greet.py", "old": "return f'bye {name}'", "new": "name = name.title()\n        return name"}
    outcome = execute_action(ws, "edit", params)
    assert outcome.returncode == 0
    assert outcome.observation.splitlines()[0] == "Edited app/greet.py; lines 6-13 now read:"
    assert "    10\t        return name" in outcome.observation
    assert outcome.accessed == [Scope("app/greet.py", (9, 10), "Greeter", "bye")]
    assert "name = name.title()\n        return name\n" in (Path(ws.env.workdir) / "app/greet.py").read_text()


def test_an_edit_of_a_files_last_line_shows_the_lines_the_file_has(ws: Codebase) -> None:
    """The final newline of the file, and that of `new`, began no line 14 of a 13-line file: the observation showed
    one, empty, and the code context marked it accessed."""
    params = {"path": "app/greet.py", "old": "hello('x'))\n", "new": "bye('x'))\n"}
    outcome = execute_action(ws, "edit", params)
    assert outcome.observation.splitlines()[0] == "Edited app/greet.py; lines 10-13 now read:"
    assert outcome.observation.splitlines()[-1] == "    13\t    print(Greeter().bye('x'))"
    assert outcome.accessed == [Scope("app/greet.py", (13,), "", "main")]
    view = execute_action(ws, "view", {"path": "app/greet.py", "start_line": 10})
    assert view.observation.splitlines()[0] == "app/greet.py (13 lines), lines 10-13:"


def test_create_refuses_to_overwrite(ws: Codebase) -> None:
    created = execute_action(ws, "create", {"path": "app/new.py", "content": "def f():\n    return 1\n"})
    assert (created.returncode, created.observation) == (0, "Created app/new.py (2 lines).")
    assert created.accessed == [Scope("app/new.py", (1, 2), "", "f", created=True)]
    again = execute_action(ws, "create", {"path": "app/new.py", "content": "x"})
    assert again.returncode == 1 and "already exists" in again.observation


def test_search_reports_matches_and_bad_patterns(ws: Codebase) -> None:
    found = execute_action(ws, "search", {"pattern": r"def (hello|bye)", "path": "app"})
    assert found.observation.splitlines() == [
        "2 matches for `def (hello|bye)`:",
        "app/greet.py:5:    def hello(self, name):",
        "app/greet.py:8:    def bye(self, name):",
    ]
    assert execute_action(ws, "search", {"pattern": "zzz_nothing"}).returncode == 1
    assert "Invalid regular expression" in execute_action(ws, "search", {"pattern": "(unclosed"}).observation
    globbed = execute_action(ws, "search", {"pattern": "^def", "path": "*.py"})
    assert "app/greet.py:12:def main():" in globbed.observation


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("app/greet.py", ["app/greet.py:5:    def hello(self, name):"]),
        ("./app/greet.py", ["app/greet.py:5:    def hello(self, name):"]),
        (".", ["app/greet.py:5:    def hello(self, name):", "app/sub/deep/more.py:1:def hello():"]),
        ("app/", ["app/greet.py:5:    def hello(self, name):", "app/sub/deep/more.py:1:def hello():"]),
        ("app/*.py", ["app/greet.py:5:    def hello(self, name):"]),
        ("app/sub/*/*.py", ["app/sub/deep/more.py:1:def hello():"]),
        ("app/**/more.py", ["app/sub/deep/more.py:1:def hello():"]),
        ("app/g[a-z]eet.p?", ["app/greet.py:5:    def hello(self, name):"]),
        ("*.py", ["app/greet.py:5:    def hello(self, name):", "app/sub/deep/more.py:1:def hello():"]),
    ],
)
def test_search_takes_a_file_a_directory_or_a_path_glob(ws: Codebase, path: str, expected: list[str]) -> None:
    ws.env.write_file("app/sub/deep/more.py", b"def hello():\n    pass\n")
    found = execute_action(ws, "search", {"pattern": r"def hello", "path": path})
    assert found.returncode == 0, found.observation
    assert sorted(found.observation.splitlines()[1:]) == expected


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("odd\nname.py", "$'app/odd\\nname.py'"),
        ("tab\there.py", "$'app/tab\\there.py'"),
        ("colon:12:x.py", "app/colon:12:x.py"),
        ("grep: look.py", "app/grep: look.py"),
    ],
)
def test_search_shows_a_file_name_with_a_newline_or_a_colon_whole(ws: Codebase, name: str, shown: str) -> None:
    """A name holding a newline was cut: its hit shown under the name's last part, as a file that does not exist."""
    ws.env.write_file(f"app/{name}", b"def hello():\n    pass\n")
    found = execute_action(ws, "search", {"pattern": r"def hello", "path": "app"})
    assert found.returncode == 0, found.observation
    assert sorted(found.observation.splitlines()[1:]) == sorted(
        ["app/greet.py:5:    def hello(self, name):", f"{shown}:1:def hello():"]
    )
    only = execute_action(ws, "search", {"pattern": r"def hello", "path": "app/*e*.py"})  # a glob matches it whole
    assert (f"{shown}:1:def hello():" in only.observation) == ("e" in name)


def test_search_names_a_missing_path_and_refuses_one_outside_the_repository(ws: Codebase) -> None:
    missing = execute_action(ws, "search", {"pattern": "x", "path": "nowhere/"})
    assert (missing.returncode, missing.observation.strip()) == (1, "No file or directory nowhere.")
    for outside in ("../*.py", "../elsewhere"):
        refused = execute_action(ws, "search", {"pattern": "x", "path": outside})
        assert refused.returncode == 2 and "outside the repository" in refused.observation


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat app/greet.py", {"app/greet.py": list(range(1, 14))}),
        ("sed -n '5,9p' app/greet.py | head -3", {"app/greet.py": [5, 6]}),
        ("head -n 3 README.md && tail -2 README.md", {"README.md": [1, 2, 3, 29, 30]}),
        ("nl -ba app/greet.py; echo done", {"app/greet.py": list(range(1, 14))}),
        ("grep -n 'name' app/greet.py", {"app/greet.py": [5, 6, 8, 9]}),
        ("python -c 'print(1)'", {}),
    ],
)
def test_bash_records_the_lines_its_output_shows(ws: Codebase, command: str, expected: dict) -> None:
    shown: dict[str, list[int]] = {}
    for scope in execute_action(ws, "bash", {"command": command}).accessed:
        shown.setdefault(scope.file_path, []).extend(scope.lines)
    assert {path: sorted(lines) for path, lines in shown.items()} == expected


def test_bash_marks_viewed_lines_and_tool_locations_accessed(ws: Codebase) -> None:
    outcome = execute_action(ws, "bash", {"command": "sed -n '12,13p' app/greet.py"})
    assert outcome.accessed == [Scope("app/greet.py", (12, 13), "", "main")]
    assert outcome.observation == "def main():\n    print(Greeter().hello('x'))"
    tool = Path(ws.env.workdir) / "navigator"
    tool.write_text(f"#!/bin/sh\necho '{ws.env.workdir}/app/greet.py:9: return'; echo '/usr/lib/x.py:3: y'\n")
    tool.chmod(0o755)
    outcome = execute_action(ws, "bash", {"command": "./navigator references Greeter.bye"})
    assert outcome.accessed == [Scope("app/greet.py", (9,), "Greeter", "bye")]
    assert execute_action(ws, "bash", {"command": "cat navigator | grep -c echo"}).accessed == []  # a count only
    assert execute_action(ws, "bash", {"command": "cat navigator"}).accessed == [Scope("navigator", (1, 2), "", "")]


def test_patch_leaves_out_ignored_binary_artefact_and_oversized_files(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "*.log\n", "data.bin": "old"})
    (repo / "a.py").write_text("x = 2\n")
    (repo / "new.py").write_text("y = 1\n")
    (repo / "run.log").write_text("noise\n")
    (repo / "pkg.egg-info").mkdir()
    (repo / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00\x01")
    (repo / "image.png").write_bytes(b"\x89PNG\x00\x00binary")
    (repo / "data.bin").write_bytes(b"\x00\x01\x02")
    (repo / "huge.txt").write_text("z" * 600_000)
    (repo / "ok.txt").write_text("z" * 1000)
    git(repo, "add", "a.py")
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    base = git(repo, "rev-parse", "HEAD").strip()
    patch = extract_patch(env, base, load_config("default").patch)
    files = sorted(line.split(" b/")[1] for line in patch.splitlines() if line.startswith("diff --git"))
    assert files == ["a.py", "new.py", "ok.txt"]
    assert "-x = 1\n+x = 2\n" in patch
    assert git(repo, "diff", "--cached", "--name-only") == "a.py\n"  # the repository's own index is untouched
    assert not (repo / ".git" / "llm-ide-patch-index").exists()
