"""What a bash command showed enters the code context as exactly those lines: real commands of the shared
mini-swe-agent trajectories, run through the bash action in their repositories at the base commit."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import unavailable
from mini_trajectories import checkout, real_command

from llm_ide.actions import execute_action
from llm_ide.cli.context import parse_line_spec
from llm_ide.codebase import Codebase
from llm_ide.codeview import CodeView
from llm_ide.codeview.observed import shown_lines
from llm_ide.codeview.reads import LineKeys
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment

Checkouts = Callable[[Path, str], Codebase]


@pytest.fixture(scope="session")
def checkouts(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> Checkouts:
    """instance → a codebase over its checkout (one clone per instance for the module; the commands only read)."""
    made: dict[str, Codebase] = {}
    root = tmp_path_factory.mktemp("checkouts")

    def get(shared: Path, instance: str) -> Codebase:
        if instance not in made:
            env = LocalEnvironment(checkout(shared, instance, root / instance, session_cache), tools_dir=root / "tools")
            made[instance] = Codebase.for_settings(env, load_config("default"))
        return made[instance]

    return get


def shown(ws: Codebase, command: str) -> dict[str, list[int]]:
    lines: dict[str, set[int]] = {}
    for scope in execute_action(ws, "bash", {"command": command}).accessed:
        lines.setdefault(scope.file_path, set()).update(scope.lines)
    return {path: sorted(found) for path, found in lines.items()}


def spec(expected: dict[str, str]) -> dict[str, list[int]]:
    return {path: parse_line_spec(lines) for path, lines in expected.items()}


@pytest.mark.parametrize(
    ("instance", "start", "expected"),
    [
        # numbered rows, a window of them (before: lines 1-200 of the file)
        (
            "pytest-dev__pytest-7432",
            "nl -ba src/_pytest/skipping.py | sed -n '220,260p'",
            {"src/_pytest/skipping.py": "220-260"},
        ),
        (
            "psf__requests-1724",
            "nl -ba requests/sessions.py | sed -n '1,25p;310,320p'",
            {"requests/sessions.py": "1-25,310-320"},
        ),
        # numbered rows filtered by grep: the groups it printed, not the gap between them
        (
            "psf__requests-1142",
            'nl -ba requests/models.py | grep -C 10 "Content-Length"',
            {"requests/models.py": "352-372,379-420"},
        ),
        (
            "psf__requests-6028",
            'nl -ba requests/utils.py | grep -A 10 "def get_auth_from_url"',
            {"requests/utils.py": "985-995"},
        ),
        # a whole file longer than the observation cap: its head and its tail, not the elided middle
        ("pytest-dev__pytest-7432", "cat src/_pytest/skipping.py", {"src/_pytest/skipping.py": "1-144,171-314"}),
        ("psf__requests-1766", "cat requests/auth.py", {"requests/auth.py": "1-194"}),
        ("pytest-dev__pytest-7432", "head -n 50 testing/test_skipping.py", {"testing/test_skipping.py": "1-50"}),
        ("pytest-dev__pytest-7432", "tail -n 20 testing/test_skipping.py", {"testing/test_skipping.py": "1188-1207"}),
        # sed -n by patterns: raw lines matched to the file
        (
            "pallets__flask-5014",
            "sed -n '/class Blueprint(Scaffold):/,/def __init__/p' src/flask/blueprints.py | head -n 50",
            {"src/flask/blueprints.py": "117-165"},
        ),
        (
            "pallets__flask-5014",
            "sed -n '/class Blueprint(Scaffold):/,/def setup_loader/p' src/flask/blueprints.py | grep -A 50",
            {"src/flask/blueprints.py": "172-222"},
        ),
        # grep hits: with line numbers, across files with them, without them (the lines, wherever they are)
        (
            "psf__requests-1142",
            'grep -n "strict" requests/packages/urllib3/connectionpool.py',
            {"requests/packages/urllib3/connectionpool.py": "142,171,176,198,513,519,542,546"},
        ),
        ("psf__requests-1142", 'grep "collections.MutableMapping" requests/cookies.py', {"requests/cookies.py": "136"}),
        (
            "psf__requests-1142",
            'grep -r "Content-Length" requests',
            {"requests/adapters.py": "157", "requests/models.py": "362,389,392,395,410"},
        ),
        ("pytest-dev__pytest-7432", 'grep -r "runxfail" testing', {"testing/test_skipping.py": "233,334,352"}),
        # no code shown: nothing recorded (before: the heredoc's words counted as viewed files)
        ("pytest-dev__pytest-7432", "ls -F", {}),
        ("pytest-dev__pytest-7432", "cat pyproject.toml setup.cfg tox.ini 2>/dev/null", None),
    ],
)
def test_each_kind_of_code_showing_command_records_exactly_the_lines_it_showed(
    shared_dir: Path, checkouts: Checkouts, instance: str, start: str, expected: dict[str, str] | None
) -> None:
    ws = checkouts(shared_dir, instance)
    command = real_command(shared_dir, instance, start)
    found = shown(ws, command)
    if expected is None:  # several whole files: every line of each
        counts = {name: (Path(ws.env.workdir) / name).read_text().count("\n") for name in ("pyproject.toml", "tox.ini")}
        assert {name: found[name] for name in counts} == {name: list(range(1, n + 1)) for name, n in counts.items()}
        return
    assert found == spec(expected)


def test_python_snippet_and_awk_that_print_source(shared_dir: Path, checkouts: Checkouts) -> None:
    """Not in the trajectories, but how other agents read code: printed source is matched like any output."""
    ws = checkouts(shared_dir, "pytest-dev__pytest-7432")
    printed = "python3 -c \"print(''.join(open('src/_pytest/skipping.py').readlines()[87:92]))\""
    assert shown(ws, printed) == spec({"src/_pytest/skipping.py": "88-92"})
    source = 'python3 -c \'import inspect, sys; sys.path.insert(0, "src"); from _pytest import store; ' + (
        "print(inspect.getsource(store.Store.get))'"
    )
    assert shown(ws, source) == spec({"src/_pytest/store.py": "99-105"})
    assert shown(ws, "awk 'NR>=100 && NR<=110' src/_pytest/skipping.py") == spec({"src/_pytest/skipping.py": "100-110"})
    assert shown(ws, "awk '{print NR\":\"$0}' src/_pytest/skipping.py | sed -n '5,7p'") == spec(
        {"src/_pytest/skipping.py": "5-7"}
    )


def test_diff_hunks_tracebacks_and_pytest_listings(shared_dir: Path, session_cache: Path, tmp_path: Path) -> None:
    repo = checkout(shared_dir, "psf__requests-1766", tmp_path / "r1766", session_cache)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "t")
    ws = Codebase.for_settings(env, load_config("default"))
    assert shown(ws, real_command(shared_dir, "psf__requests-1766", "sed -i 's/qop=auth/")) == {}
    assert shown(ws, real_command(shared_dir, "psf__requests-1766", "git diff requests/auth.py")) == spec(
        {"requests/auth.py": "144-150"}  # the hunk's post-image: context and added lines
    )

    repo = checkout(shared_dir, "psf__requests-1142", tmp_path / "r1142", session_cache)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "t")
    ws = Codebase.for_settings(env, load_config("default"))
    assert shown(ws, real_command(shared_dir, "psf__requests-1142", "cat <<'EOF' > reproduce_issue.py")) == {}
    # Python 3.11 cannot import this old requests: each traceback frame shows one code line, an import statement in
    # each of these eight files (reproduce_issue.py:1, requests/__init__.py:52, … _collections.py:7): where the import
    # went, no code read, so none is recorded (they re-activated eight module-level chunks at every such run)
    assert shown(ws, real_command(shared_dir, "psf__requests-1142", "python3 reproduce_issue.py")) == {}

    if shutil.which("pytest") is None:
        unavailable("pytest is not on PATH (put the venv's bin first)")
    repo = checkout(shared_dir, "pytest-dev__pytest-7432", tmp_path / "p7432", session_cache)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "t")
    ws = Codebase.for_settings(env, load_config("default"))
    # the failing test's source as pytest lists it, four columns in
    assert shown(ws, real_command(shared_dir, "pytest-dev__pytest-7432", "cat <<'EOF' > test_loc.py")) == {
        "test_loc.py": [2, 3]
    }


def test_rows_are_checked_against_the_file_as_it_is(tmp_path: Path) -> None:
    """A numbered row whose text is not the file's line N, a grep row of another version, or a lone common line
    shows nothing of the file; runs are anchored where the file has them."""
    (tmp_path / "a.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    view = CodeView(LocalEnvironment(tmp_path, tools_dir=tmp_path / ".tools"))

    def load(raws: list[str]) -> dict[str, tuple[str, LineKeys]]:
        return {raw: (raw, keys) for raw in raws if (keys := view.line_keys(raw)) is not None}

    assert shown_lines("nl -ba a.py", "     1\tdef f():\n     2\t    return 2", load) == {"a.py": {1}}
    assert shown_lines("grep -n return a.py", "2:    return 1\n6:    return 7", load) == {"a.py": {2}}
    assert shown_lines("grep -rn def .", "a.py:5:def g():\nb.py:1:def h():", load) == {"a.py": {5}}
    assert shown_lines("cat a.py", "    return 1", load) == {}  # twice in the file, once in the output
    assert shown_lines("sed -n 5,6p a.py", "def g():\n    return 1", load) == {"a.py": {5, 6}}
    assert shown_lines("echo", "def g():\n    return 1", load) == {}  # no file named: nothing to match


# astropy 13579's `python check_units.py` where astropy is not built (no erfa): a warning and a traceback, as printed
CHECK_UNITS = """astropy/version.py:11: UserWarning: could not determine astropy package version; this indicates a \
broken installation
  warnings.warn(
Traceback (most recent call last):
  File "check_units.py", line 1, in <module>
    import astropy.wcs
  File "astropy/__init__.py", line 41, in <module>
    from . import config as _config  # noqa: E402
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "astropy/config/__init__.py", line 10, in <module>
    from .configuration import *
  File "astropy/config/configuration.py", line 24, in <module>
    from astropy.utils import find_current_module, silence
  File "astropy/utils/__init__.py", line 17, in <module>
    from .codegen import *  # noqa
    ^^^^^^^^^^^^^^^^^^^^^^
  File "astropy/utils/codegen.py", line 12, in <module>
    from .introspection import find_current_module
  File "astropy/utils/introspection.py", line 13, in <module>
    from astropy.utils.decorators import deprecated_renamed_argument
  File "astropy/utils/decorators.py", line 13, in <module>
    from .exceptions import (AstropyDeprecationWarning, AstropyUserWarning,
  File "astropy/utils/exceptions.py", line 11, in <module>
    from erfa import ErfaError, ErfaWarning  # noqa
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ModuleNotFoundError: No module named 'erfa'"""


def test_a_traceback_marks_its_frames_lines_but_an_import_chains_and_no_lone_row_of_the_files_it_names(
    shared_dir: Path, checkouts: Checkouts
) -> None:
    """`warnings.warn(` and `Traceback (most recent call last):` are lone lines of decorators.py too (518, and 620 in a
    docstring); the traceback only names that file: they are not its lines there. A warning's source row is."""
    ws = checkouts(shared_dir, "astropy__astropy-13579")
    view = ws.view

    def load(raws: list[str]) -> dict[str, tuple[str, LineKeys]]:
        return {raw: (raw, keys) for raw in raws if (keys := view.line_keys(raw)) is not None}

    command = real_command(shared_dir, "astropy__astropy-13579", "cat <<'EOF' > check_units.py")
    assert shown_lines(command, CHECK_UNITS, load) == {
        "astropy/version.py": {11},  # the warning's row; every frame of the traceback is an import statement
    }
    warned = "astropy/utils/decorators.py:518: AstropyDeprecationWarning: gone\n    warnings.warn("
    assert shown_lines("python x.py", warned, load) == {"astropy/utils/decorators.py": {518}}
    framed = (
        'Traceback (most recent call last):\n  File "astropy/utils/decorators.py", line 518, in f\n    warnings.warn('
    )
    assert shown_lines("python x.py", framed, load) == {"astropy/utils/decorators.py": {518}}  # a frame in code
    # the same rows in a file the command names (grep without -n) are its lines
    assert shown(ws, "grep 'warnings.warn(' astropy/utils/decorators.py") == {
        "astropy/utils/decorators.py": [121, 506, 518, 543]
    }


DEDENTED = """python3 - <<'EOF'
import ast, textwrap
source = open('requests/models.py').read()
for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.FunctionDef) and node.name == 'prepare_content_length':
        print(textwrap.dedent(ast.get_source_segment(source, node, padded=True)))
EOF"""
LINECACHE = """python3 - <<'EOF'
import linecache
for number in range(433, 446):
    print(f"{number:>5} | {linecache.getline('sphinx/util/inspect.py', number).rstrip()}")
EOF"""


REAL = [  # commands of the trajectories (by their start) whose rows carry no line number: matched by content
    ("sympy__sympy-13974", "tail -n +348", {"sympy/physics/quantum/tensorproduct.py": "348-393"}),
    ("psf__requests-2317", "sed -n '/def to_native_string/,/return/p'", {"requests/utils.py": "655-657"}),
    ("sympy__sympy-24661", "sed -n '/def parse_expr/,/^def/p'", {"sympy/parsing/sympy_parser.py": "961-1090"}),
    ("sphinx-doc__sphinx-9281", "head -n 20 sphinx/util/inspect.py", {"sphinx/util/inspect.py": "1-20"}),
]
OTHER = [  # the lines those trajectories looked at, printed the ways other agents print code
    (
        "sphinx-doc__sphinx-9281",
        "awk 'NR>=430 && NR<=460' sphinx/util/inspect.py",
        {"sphinx/util/inspect.py": "430-460"},
    ),
    (
        "sphinx-doc__sphinx-9281",
        "git show HEAD:sphinx/util/inspect.py | sed -n '430,460p'",
        {"sphinx/util/inspect.py": "430-460"},
    ),
    (
        "sphinx-doc__sphinx-9281",
        "sed -n '/def object_description/,+12p' sphinx/util/inspect.py",
        {"sphinx/util/inspect.py": "433-445"},
    ),
    (
        "sphinx-doc__sphinx-9281",
        "awk '{print NR\": \"$0}' sphinx/util/inspect.py | sed -n '433,445p'",
        {"sphinx/util/inspect.py": "433-445"},
    ),
    # 800 characters: 28 whole lines and the start of the 29th, which is not that line
    (
        "sphinx-doc__sphinx-9281",
        "python3 -c \"print(open('sphinx/util/inspect.py').read()[:800])\"",
        {"sphinx/util/inspect.py": "1-28"},
    ),
    # shapes no rule of the parser knows: a method printed dedented (every row 4 columns left), rows `N | text`
    ("psf__requests-1142", DEDENTED, {"requests/models.py": "388-395"}),
    ("sphinx-doc__sphinx-9281", LINECACHE, {"sphinx/util/inspect.py": "433-445"}),
]


@pytest.mark.parametrize(("instance", "command", "expected"), REAL + OTHER)
def test_any_command_that_prints_code_marks_the_lines_it_printed(
    shared_dir: Path, checkouts: Checkouts, instance: str, command: str, expected: dict[str, str]
) -> None:
    ws = checkouts(shared_dir, instance)
    if (instance, command, expected) in REAL:
        command = real_command(shared_dir, instance, command)
    assert shown(ws, command) == spec(expected)


def test_a_file_no_command_names_is_matched_when_the_context_holds_it(shared_dir: Path, checkouts: Checkouts) -> None:
    ws = checkouts(shared_dir, "sphinx-doc__sphinx-9281")
    hidden = "git grep -h -A 12 'def object_description'"  # neither the command nor the output names the file
    ws.view.invalidate()
    assert shown(
        ws, real_command(shared_dir, "sphinx-doc__sphinx-9281", "nl -ba sphinx/util/inspect.py | sed -n '430,460p'")
    ) == spec({"sphinx/util/inspect.py": "430-460"})
    assert shown(ws, hidden) == spec({"sphinx/util/inspect.py": "433-445"})


NUMBERED = (
    "def f():\n    total = compute_the_total(1)\n    return total\n\n\ndef g():\n    other = compute_the_total(2)\n"
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("nl -ba a.py | sed -n '2,3p'", [2, 3]),
        ("cat -n a.py | sed -n '7p'", [7]),
        ("grep -n compute_the_total a.py", [2, 7]),
        ("grep -n -A 1 'total = ' a.py", [2, 3]),  # `2:text`, then the context row `3-text`
        ("grep -n -B 1 'other = ' a.py", [6, 7]),
        ("awk '{print NR\": \"$0}' a.py | sed -n '2p'", [2]),
        ("awk '{printf \"%4d | %s\\n\", NR, $0}' a.py | sed -n '3p'", [3]),
        ("awk '{print NR\"  \"$0}' a.py | sed -n '7p'", [7]),
    ],
)
def test_each_numbered_row_shape_of_the_docs_marks_its_line(tmp_path: Path, command: str, expected: list[int]) -> None:
    """docs/code-context.md's first row: `nl -ba`, `cat -n`, `grep -n` with its context rows (`12-text`), `12: text`,
    `  12 | text`, `12  text`, each on a real command's output."""
    (tmp_path / "a.py").write_text(NUMBERED)
    ws = Codebase.for_settings(LocalEnvironment(tmp_path, tools_dir=tmp_path / ".tools"), load_config("default"))
    assert shown(ws, command) == {"a.py": expected}
