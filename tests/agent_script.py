"""Helpers that write scripted-model responses in the agent's response format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from conftest import make_git_repo

from llm_ide import verdict
from llm_ide.actions import CORE_GRAMMAR
from llm_ide.config import load_config
from llm_ide.parsing import parse_action
from llm_ide.run.single import run_task
from llm_ide.script_file import joined_script


def act(thought: str, action_type: str, **params: Any) -> str:
    return (
        f"<thought>{thought}</thought>\n<action_type>{action_type}</action_type>\n"
        f"<action_params>{json.dumps(params)}</action_params>"
    )


def reflect(bad: bool, summary: str, lessons: str = "") -> str:
    return f"<bad_action>{str(bad).lower()}</bad_action>\n<lessons>{lessons}</lessons>\n<summary>{summary}</summary>"


def single_call(responses: list[str]) -> list[str]:
    """A two-call script as the replies of a single-call run (the default): each reflection with the action after it
    (what the scripted model does itself; an endpoint test serves these)."""
    return [str(reply) for reply in joined_script(list(responses))]


def tool_script(responses: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """A two-call script as the replies of a single-call run whose actions are tools: each reply's text (the verdict
    on the operation before, then the reasoning), the tool it calls and the call's arguments."""
    replies = []
    for reply in single_call(responses):
        tagged, rest = verdict.split(reply) if reply.startswith("<bad_action>") else ("", reply)
        action = parse_action(rest, CORE_GRAMMAR)
        found = verdict.parse(tagged) if tagged else None
        terse = f"{'bad' if found.bad else 'good'}: {found.summary}" if found else ""
        terse += "".join(f"\nlesson: {line.lstrip('- ')}" for line in found.lessons.splitlines()) if found else ""
        text = f"{terse}\n{action.thought}" if found else action.thought
        replies.append((text, action.action_type, action.action_params))
    return replies


def write_script(path: Path, responses: list[Any]) -> str:
    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False))
    return f"scripted:{path}"


BUGGY_FILES = {
    "shop/__init__.py": "",
    "shop/cart.py": (
        "from dataclasses import dataclass, field\n"
        "\n"
        "\n"
        "@dataclass\n"
        "class Cart:\n"
        "    items: list[tuple[str, float, int]] = field(default_factory=list)\n"
        "\n"
        "    def add(self, name: str, price: float, quantity: int = 1) -> None:\n"
        "        self.items.append((name, price, quantity))\n"
        "\n"
        "    def total(self) -> float:\n"
        "        total = 0.0\n"
        "        for name, price, quantity in self.items:\n"
        "            total += price\n"
        "        return round(total, 2)\n"
    ),
    "tests/__init__.py": "",
    "tests/test_cart.py": (
        "import unittest\n"
        "\n"
        "from shop.cart import Cart\n"
        "\n"
        "\n"
        "class CartTest(unittest.TestCase):\n"
        "    def test_total_counts_quantities(self):\n"
        "        cart = Cart()\n"
        "        cart.add('pen', 1.5, 4)\n"
        "        cart.add('book', 10.0)\n"
        "        self.assertEqual(cart.total(), 16.0)\n"
    ),
    ".gitignore": "*.log\n",
}

TEST_COMMAND = "python3 -m unittest discover -s tests -t . 2>&1"

FIX_SCRIPT = [
    act("Read the cart's total[1](shop/cart.py:11).", "view", path="shop/cart.py", start_line=1, end_line=15),
    reflect(False, "Cart.total sums price only."),
    act(
        "Hypothesis: rounding in total[1](shop/cart.py:15) loses the quantities; run the tests to see the numbers.",
        "bash",
        command=TEST_COMMAND,
    ),
    reflect(
        True,
        "The test fails with 11.5 != 16.0: rounding is not the problem, the hypothesis is refuted.",
        "Rounding in Cart.total is fine; 11.5 means quantities are ignored.\n- Run the tests before guessing.",
    ),
    act(
        "The loop adds price without quantity[1](shop/cart.py:14) inside the for loop[2](shop/cart.py:13).",
        "edit",
        path="shop/cart.py",
        old="            total += price\n",
        new="            total += price * quantity\n",
    ),
    reflect(False, "Cart.total now multiplies price by quantity."),
    act("Check the fix[1](shop/cart.py:14).", "bash", command=TEST_COMMAND),
    reflect(False, "The tests pass."),
    act("Done.", "submit"),
]

# Single driver steps on the cart project (the navigator tests script their own orders of them)
CART_VIEW = act("Read Cart.total[1](shop/cart.py:11).", "view", path="shop/cart.py", start_line=1, end_line=15)
CART_FIX = act(
    "The loop ignores the quantity[1](shop/cart.py:14).",
    "edit",
    path="shop/cart.py",
    old="            total += price\n",
    new="            total += price * quantity\n",
)
CART_TESTS = act("Run the tests[1](shop/cart.py:14).", "bash", command=TEST_COMMAND)
CART_SUBMIT = act("Fixed and tested.", "submit")


def cart_run(tmp_path: Path, spec: str, url: str | None, variants: list | None = None, **values: Any) -> Any:
    """A run at the cart's bug (`Cart.total ignores quantities.`) in a repository of BUGGY_FILES made in `tmp_path`
    (`values`: config sections; the model's with no retries): its result."""
    model = {"max_retries": 0, "timeout": 30, **values.pop("model", {})}
    settings = load_config("default", environment={"tools": []}, model=model, **values)
    return run_task(
        "Cart.total ignores quantities.",
        model=spec,
        base_url=url,
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="t",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
        variants=variants or [],
    )
