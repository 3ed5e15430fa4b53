"""The navigator tool run as the agent runs it (a subprocess in the project), on a package the test writes."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_ide.tools.config import TOOLS_DIR

NAVIGATOR_SRC = TOOLS_DIR / "packages" / "navigator" / "src"
FILES = {
    "shop/__init__.py": "",
    "shop/pricing.py": "RATE = 0.1\n\n\ndef discount(amount):\n    return amount * (1 - RATE)\n",
    "shop/cart.py": """\
import json

from shop.pricing import discount


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, price):
        self.items.append((name, price))

    def total(self):
        subtotal = sum(price for _, price in self.items)
        return discount(subtotal)

    def dump(self):
        return json.dumps(self.items)
""",
    "main.py": 'from shop.cart import Cart\n\ncart = Cart()\ncart.add("pen", 2.0)\nprint(cart.total())\n',
}

Navigator = Callable[..., tuple[str, int]]


@pytest.fixture
def navigator(tmp_path: Path) -> Navigator:
    project = tmp_path / "project"
    for name, text in FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(NAVIGATOR_SRC), "NAVIGATOR_PYTHON": sys.executable}

    def run(*args: str, cwd: Path = project) -> tuple[str, int]:
        done = subprocess.run(
            [sys.executable, "-m", "llm_ide_navigator", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.stdout + done.stderr, done.returncode

    return run


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (["main.py", "5", "total"], "shop/cart.py:13: def total(self):\n"),
        (["main.py", "5", "cart.total"], "shop/cart.py:13: def total(self):\n"),
        (["main.py", "5", "7"], "main.py:3: cart = Cart()\n"),
        (["main.py", "1", "Cart"], "shop/cart.py:6: class Cart:\n"),
        (["shop/cart.py", "15", "discount"], "shop/pricing.py:4: def discount(amount):\n"),
        (["shop/cart.py", "Cart.add"], "shop/cart.py:10: def add(self, name, price):\n"),
        (["shop/pricing.py", "RATE"], "shop/pricing.py:1: RATE = 0.1\n"),
    ],
)
def test_definition(navigator: Navigator, location: list[str], expected: str) -> None:
    assert navigator("definition", *location) == (expected, 0)


def test_definition_in_the_standard_library(navigator: Navigator) -> None:
    lines, start = inspect.getsourcelines(json.dumps)
    expected = f"{Path(json.__file__)}:{start}: {lines[0].strip()}\n"
    assert navigator("definition", "shop/cart.py", "18", "json.dumps") == (expected, 0)
    assert navigator("definition", "shop/cart.py", "json.dumps") == (expected, 0)


def test_references(navigator: Navigator, tmp_path: Path) -> None:
    uses_of_discount = (
        "shop/cart.py:3: from shop.pricing import discount\n"
        "shop/cart.py:15: return discount(subtotal)\n"
        "shop/pricing.py:4: def discount(amount):\n"
    )
    assert navigator("references", "shop/pricing.py", "4", "discount") == (uses_of_discount, 0)
    assert navigator("references", "shop/pricing.py", "discount") == (uses_of_discount, 0)
    assert navigator("references", "main.py", "4", "add") == (
        'main.py:4: cart.add("pen", 2.0)\nshop/cart.py:10: def add(self, name, price):\n',
        0,
    )
    # --root: run from elsewhere, paths still relative to the project
    assert navigator("--root", str(tmp_path / "project"), "references", "shop/pricing.py", "1", "1", cwd=tmp_path) == (
        "shop/pricing.py:1: RATE = 0.1\nshop/pricing.py:5: return amount * (1 - RATE)\n",
        0,
    )


def test_symbols(navigator: Navigator, tmp_path: Path) -> None:
    assert navigator("symbols", "total") == ("shop/cart.py:13: def total(self):\n", 0)
    assert navigator("symbols", "class Cart") == ("shop/cart.py:6: class Cart:\n", 0)
    assert navigator("symbols", "Cart.add") == ("shop/cart.py:10: def add(self, name, price):\n", 0)
    assert navigator("symbols", "cart") == ("shop/cart.py:1: (module shop.cart)\nmain.py:3: cart = Cart()\n", 0)
    assert navigator("--limit", "1", "symbols", "cart") == (
        "shop/cart.py:1: (module shop.cart)\n[... 1 more: --limit N shows more]\n",
        0,
    )
    project = (tmp_path / "project").resolve()
    assert navigator("symbols", "no_such_name") == (f"navigator: no symbol matches 'no_such_name' under {project}\n", 1)


def test_the_parses_stay_in_tmpdir_for_the_next_call_when_the_home_is_new_at_each(tmp_path: Path) -> None:
    """The parses go to $TMPDIR (the run's scratch), not the home (the run's own too, but not a tool's to fill): the
    first call leaves a parse of every project file there, the next ones (each with another empty home) parse none
    again and answer the same."""
    project, scratch = tmp_path / "project", tmp_path / "scratch"
    for name, text in FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    scratch.mkdir()

    def call(number: int, *args: str) -> tuple[str, int]:
        home = tmp_path / f"home-{number}"
        home.mkdir()
        env = {name: value for name, value in os.environ.items() if name != "XDG_CACHE_HOME"}  # (jedi's, else ~/.cache)
        env |= {"PYTHONPATH": str(NAVIGATOR_SRC), "HOME": str(home), "TMPDIR": str(scratch)}
        done = subprocess.run([sys.executable, "-m", "llm_ide_navigator", *args], cwd=project, env=env, text=True,
                              capture_output=True, timeout=120)  # fmt: skip
        assert list(home.iterdir()) == []
        return done.stdout + done.stderr, done.returncode

    def parses() -> dict[str, int]:
        return {path.name: path.stat().st_mtime_ns for path in (scratch / "jedi").rglob("*.pkl")}

    answer = ("shop/cart.py:10: def add(self, name, price):\n", 0)
    assert call(1, "symbols", "Cart.add") == answer
    kept = parses()
    assert len(kept) >= len(FILES)  # the project's files (and what they import)
    assert call(2, "symbols", "Cart.add") == answer
    assert call(3, "references", "shop/pricing.py", "discount")[1] == 0
    assert parses() == kept


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["definition", "nope.py", "1", "1"], ("navigator: no such file: nope.py\n", 2)),
        (
            ["definition", "main.py", "5", "missing"],
            ("navigator: `missing` does not occur on line 5: print(cart.total())\n", 2),
        ),
        (["definition", "main.py", "50", "1"], ("navigator: line 50 is outside the file (1-5)\n", 2)),
        (["definition", "main.py", "5"], ("navigator: after LINE give a COL (1-based) or the NAME on that line\n", 2)),
        (["references", "main.py", "2", "1"], ("navigator: no references found for 2 1 in main.py\n", 1)),
    ],
)
def test_errors(navigator: Navigator, args: list[str], expected: tuple[str, int]) -> None:
    assert navigator(*args) == expected
