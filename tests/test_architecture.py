"""The import structure keeps its targets (scripts/architecture.py): the variants named only at the composition
point, few function-local imports, no arrow back up a layer, no circle; and the script counts what it says it counts
on a small package of its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import conftest
from in_process import run_script

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from architecture import TARGETS, long_modules, measure  # noqa: E402
from code_shape import measure_shape  # noqa: E402
from step_shape import measure_step  # noqa: E402


def test_the_package_keeps_its_targets() -> None:
    """The script's run is the one measurement: the variant names and local imports are those its details list (a
    second `measure()` here parsed the package again, ~0.7 s of CPU)."""
    wide = {**os.environ, "COLUMNS": "1000"}  # rich wraps at 80 columns where stdout is no terminal
    done = run_script(SCRIPTS / "architecture.py", "--details", cwd=SCRIPTS, env=wide)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    figures = dict(item.split("=") for item in lines[-1].removeprefix("RESULT ").split())
    assert {key: int(value) <= TARGETS[key] for key, value in figures.items()} == dict.fromkeys(TARGETS, True)
    assert figures["circles"] == "0" and figures["variant_mentions_elsewhere"] == "0"
    assert figures["folder_circles"] == "0" and figures["format_reads"] == "0" and figures["tool_call_tags"] == "0"
    assert 6 <= int(figures["reading_path_files"]) <= TARGETS["reading_path_files"]  # the six nodes at least
    [named] = [line.split("): ", 1)[1] for line in lines if line.startswith("variant names at the composition point")]
    assert set(named.split(", ")) <= {"navigator", "sampling", "attempts", "coop", "mailbox", "reproduction"}
    local_imports = [line.split()[1] for line in lines if line.startswith("  local ")]
    assert len(local_imports) == int(figures["local_imports"])
    # lazy facades and kinds; the program, whose imports a Ctrl-C may interrupt
    seams = ("__init__.py", "coop/__init__.py", "swebench/", "environments/__init__.py", "__main__.py")
    assert all(path.startswith(seams) for path in local_imports)
    long = [line.split()[2] for line in lines if line.startswith("  long module ")]
    assert len(long) == int(figures["long_test_and_script_modules"]) and all(long) and "tests/conftest.py" not in long


def test_no_module_is_over_400_lines() -> None:
    package = SCRIPTS.parent / "llm_ide"
    sizes = {str(path.relative_to(package)): len(path.read_text().splitlines()) for path in package.rglob("*.py")}
    assert len(sizes) > 100 and sizes["models.py"] > 100
    assert {name: lines for name, lines in sizes.items() if lines > 400} == {}


def test_the_suites_conftest_and_the_plugins_it_loads_are_not_over_400_lines() -> None:
    tests = SCRIPTS.parent / "tests"
    plugins = ["conftest", *getattr(conftest, "pytest_plugins", ())]
    sizes = {name: len((tests / f"{name}.py").read_text().splitlines()) for name in plugins}
    assert {name: lines for name, lines in sizes.items() if lines > 400} == {}
    assert "cpu_accounting" in sizes  # --cpu-limit, --cpu-durations (test_cpu_guard runs them)


def test_the_test_and_script_modules_over_400_lines_are_counted(tmp_path: Path) -> None:
    """A module of tests/ or scripts/ over 400 lines is counted with its lines; one of 400, a subfolder's (tests/data)
    and a file that is no module are not."""
    sizes = {"tests/test_long.py": 401, "tests/test_at_most.py": 400, "tests/data/generated.py": 900}
    sizes |= {"scripts/bench_long.py": 500, "scripts/notes.md": 900, "llm_ide/big.py": 700}
    for name, lines in sizes.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n" * lines)
    assert long_modules(tmp_path) == {"scripts/bench_long.py": 500, "tests/test_long.py": 401}
    assert long_modules(tmp_path, ("tests",)) == {"tests/test_long.py": 401}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "llm_ide" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_an_arrow_back_up_a_local_import_and_a_variant_named_in_the_core_are_counted(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "__init__.py": "",
            "base.py": "from llm_ide import core\n",  # foundation importing the core: up, and a circle with core
            "core.py": "import llm_ide.base\n\n\ndef f():\n    from llm_ide.cli import main  # up, local\n",
            "glue.py": '"""The navigator and sampling, composed."""\nfrom llm_ide.core import f\n',
            "cli/__init__.py": "def main():\n    from llm_ide import core\n",  # local, but in cli/: not counted
        },
    )
    layers = [("foundation", ("base.py",)), ("core", ("core.py", "glue.py")), ("top", ("cli/", "__init__.py"))]
    counts = measure(root, layers, core=("core.py", "glue.py"), composition=("glue.py",))
    assert counts.circles == [["llm_ide.base", "llm_ide.cli", "llm_ide.core"]]  # core and cli import each other too
    assert counts.arrows_up == [("base.py", "core.py"), ("core.py", "cli/__init__.py")]
    assert counts.local_imports == [("core.py", 5, "llm_ide.cli")]
    assert counts.variant_names == ["navigator", "sampling"] and counts.variant_mentions == []
    moved = measure(root, layers, core=("core.py", "glue.py"), composition=("core.py",))
    assert [(path, word) for path, _, word in moved.variant_mentions] == [
        ("glue.py", "navigator"),
        ("glue.py", "sampling"),
    ]


def test_the_folder_level_and_the_codes_shape_are_counted(tmp_path: Path) -> None:
    """Folders that import each other, a folder the layer table splits, a long function, a `# fmt: skip`, the
    places that decide an exit status (not those that compare one), the reads of the exchange's choice outside it, a
    reading path and a protocol's members with the variants that implement them."""
    long = "def long():\n" + "    x = 1\n" * 61
    root = write(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": 'class ExitStatus:\n    DONE = "done"\n    FAILED = "failed"\n\n    @property\n'
            "    def finished(self): ...\n\n\nclass Done:\n    exit_status = ExitStatus.DONE\n",
            "low/__init__.py": "",
            "low/a.py": "from llm_ide.high import b\nimport llm_ide.status\n",
            "high/__init__.py": "",
            "high/b.py": "from llm_ide.low import a\n" + long,
            "high/c.py": "x = [1,  2]  # fmt: skip\n",
            "status.py": "from llm_ide.errors import ExitStatus\n\n\n"
            "def f(s, settings):\n    if s == ExitStatus.FAILED:\n        return {'exit_status': 'done'}\n"
            "    return settings.agent.single_call\n",
            "variant.py": "class Variant:\n    name = ''\n\n    def nodes(self): ...\n\n    def info(self): ...\n",
            "navigator/variant.py": "from llm_ide.variant import Variant\n\n\nclass Navigator(Variant):\n"
            "    name = 'n'\n\n    def nodes(self): ...\n",
            "reproduction/variant.py": "from llm_ide.variant import Variant\n\n\nclass Repro(Variant):\n"
            "    name = 'r'\n\n    def nodes(self): ...\n",
            "sampling/variant.py": "",
            "messages/variant.py": "",
        },
    )
    (root / "docs").mkdir()
    (root / "docs" / "architecture.md").write_text(
        "<!-- reading path -->\n1. `llm_ide/status.py`\n<!-- /reading path -->"
    )
    top = ("high/", "status.py", "variant.py", "__init__.py", "navigator/", "reproduction/", "sampling/", "messages/")
    layers = [("low", ("low/", "high/c.py", "errors.py")), ("high", top)]
    counts = measure(root, layers, core=(), composition=())
    assert counts.folder_circles == [["high", "low"]] and counts.split_folders == ["high"]
    assert counts.folder_arrows_up == [("low", "status")]  # `high` sits on its lowest module's layer
    shape = measure_shape(root)
    assert shape.long_functions == [("high/b.py", "long", 62)] and shape.fmt_skips == [("high/c.py", 1)]
    assert shape.status_files == {"errors.py": [10], "status.py": [6]}  # the comparison is no decision
    step = measure_step(root)
    assert step.format_reads == [("status.py", 7)] and shape.reading_path == {"llm_ide/status.py": 7}
    assert shape.protocol == {"name": ["Navigator", "Repro"], "nodes": ["Navigator", "Repro"], "info": []}
    assert shape.figures()["protocol_members_used_once"] == 1
