"""The model navigator on its own (as `llm-ide navigator serve` uses it): read-only exploration in its own memory,
then permission, review, guidance and plan answers; a scripted model drives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, write_script
from conftest import make_git_repo

from llm_ide.config import load_config
from llm_ide.navigator.gate import gated, read_only
from llm_ide.navigator.model import ModelNavigator
from llm_ide.navigator.protocol import NavigatorError, PermissionRequest, ReviewRequest
from llm_ide.navigator.settings import NavigatorSettings


def tag(name: str, params: dict | None = None, thought: str = "") -> str:
    return f"{thought}\n<{name}>{json.dumps(params or {})}</{name}>"


@pytest.fixture
def make(tmp_path: Path):
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    made: list[ModelNavigator] = []

    def build(responses: list[str], **navigator: object) -> ModelNavigator:
        model = write_script(tmp_path / f"nav{len(made)}.yaml", responses)
        settings = load_config("default", environment={"tools": []}, navigator={"mode": "model", **navigator})
        logged: list[dict] = []
        nav = ModelNavigator.create(settings, model, repo, task="Cart.total ignores quantities.")
        nav.record_call = logged.append
        nav.logged = logged  # type: ignore[attr-defined]
        made.append(nav)
        return nav

    yield build
    for nav in made:
        nav.close()


def test_plan_explores_read_only_in_its_own_memory_then_answers_every_request(make, tmp_path: Path) -> None:
    nav = make(
        [
            tag("view", {"path": "shop/cart.py", "start_line": 1, "end_line": 15}, "The total[1](shop/cart.py:11)."),
            tag("edit", {"path": "shop/cart.py", "old": "price\n", "new": "price * quantity\n"}),
            tag("bash", {"command": "grep -n quantity shop/cart.py"}),
            tag("bash", {"command": "sed -i s/price/x/ shop/cart.py"}),
            "<plan>1. Multiply price by quantity in Cart.total.\n2. Run the tests.</plan>",
            "<deny>Editing the tests hides the bug; fix Cart.total instead.</deny>",
            tag("bash", {"command": "python3 -m unittest discover -s tests -t . 2>&1"}),
            "<fail>The test still fails: 11.5 != 16.0.</fail>\n<plan>1. Use price * quantity.</plan>",
            "<answer>Look at the loop in Cart.total.</answer>",
        ]
    )
    plan = nav.plan("Cart.total ignores quantities.")
    assert plan.text == "1. Multiply price by quantity in Cart.total.\n2. Run the tests."
    assert plan.usage.api_calls == 5
    assert [n.action_type for n in nav.nodes] == ["view", "bash"]  # the edit and `sed -i` were refused, never run
    assert "price * quantity" not in (tmp_path / "repo" / "shop/cart.py").read_text()
    assert "Refused: `edit` is not read-only" in nav.logged[2]["prompt"]
    assert "13:        for name, price, quantity in self.items:" in nav.nodes[1].observation

    request = PermissionRequest(action="edit tests/test_cart.py", thought="Relax the test.", diff="-16.0\n+11.5")
    decision = nav.request_permission(request)
    assert (decision.approved, decision.by, decision.usage.api_calls) == (False, "model", 1)
    assert decision.reason == "Editing the tests hides the bug; fix Cart.total instead."
    prompt = nav.logged[5]["prompt"]
    assert "## Code Context" in prompt and "total += price" in prompt  # its own memory, rendered by the snapshot
    assert "### Operation 0" in prompt and "Multiply price by quantity" in prompt and "-16.0\n+11.5" in prompt

    review = nav.request_review(ReviewRequest(patch="(none)", summary="nothing yet"), round=1)
    assert (review.passed, review.comment) == (False, "The test still fails: 11.5 != 16.0.")
    assert review.plan == "1. Use price * quantity."
    assert "FAILED" in nav.nodes[-1].observation  # the reviewer ran the tests
    assert nav.plan_text == "1. Use price * quantity."
    assert nav.request_guidance("Where?").answer == "Look at the loop in Cart.total."
    assert nav.usage.api_calls == 9 == len(nav.drain())
    assert [c["kind"] for c in nav.logged][-3:] == ["navigator_review", "navigator_review", "navigator_guidance"]


def test_a_request_of_any_size_reaches_the_prompt_bounded(make) -> None:
    """An MCP client's request may carry megabytes: each text is cut to its setting (diff_chars, context_chars,
    patch_chars), head and tail kept (a 1.1 M-character request went whole into the navigator's prompt)."""
    nav = make(["<deny>Too big to read.</deny>", "<pass>Fine.</pass>", "<answer>Here.</answer>"], plan=False)
    huge = "+x\n" * 300_000
    nav.request_permission(
        PermissionRequest(action="edit a.py", diff=huge, context="y\n" * 100_000, reason="z" * 10**6)
    )
    nav.request_review(ReviewRequest(patch=huge, summary="s" * 10**6))
    nav.request_guidance("q" * 10**6)
    config = nav.config
    limits = [config.diff_chars + 2 * config.context_chars, config.patch_chars + config.context_chars,
              config.context_chars]  # fmt: skip
    sizes = [len(call["prompt"]) for call in nav.logged]
    assert all(size < limit + 20_000 for size, limit in zip(sizes, limits, strict=True)), sizes  # + the prompt's own
    assert all(huge[:100] in call["prompt"] for call in nav.logged[:2])  # the head is kept


def test_a_navigator_that_never_answers_is_an_error(make) -> None:
    nav = make([tag("view", {"path": "shop/cart.py"})] * 6, explore_steps=2)
    with pytest.raises(NavigatorError, match="no approve/deny answer to the permission request"):
        nav.request_permission(PermissionRequest(action="bash: rm -rf /"))
    assert len(nav.nodes) == 2  # two read-only actions, then only asked to answer


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("grep -rn total shop | head -5", True),
        ("cat shop/cart.py 2>&1", True),
        ("git diff HEAD", True),
        ("git commit -am x", False),
        ("sed -n 1,5p shop/cart.py", True),
        ("sed -i s/a/b/ shop/cart.py", False),
        ("cat a > b", False),
        ("python3 -m unittest", False),
        ("find . -name '*.pyc' -delete", False),
        ("ls $(rm -rf x)", False),
        ("ls\ntouch pwn", False),  # a second line is a second command
        ("ls <(touch pwn)", False),
        ("sed -n 'w pwn' shop/cart.py", False),  # sed commands that write or run (`w`, `e`, `s///w`, `s///e`)
        ("sed -n '1e touch pwn' shop/cart.py", False),
        ("sed 's/a/b/w pwn' shop/cart.py", False),
        ("sed 's/a/b/e' shop/cart.py", False),
        ("sed -i.bak s/a/b/ shop/cart.py", False),
        ("sed -f script.sed shop/cart.py", False),
        ("sed -n '/def total/,/^def/p' shop/cart.py", True),
        ("sed -n 's/;/,/gp; 10,20{p;=}' shop/cart.py", True),
        ("sed -ne 5p -e '$p' shop/cart.py", True),
        ("sed -n '/[/]/p' shop/cart.py", False),  # a delimiter inside brackets: not followed, taken as writing
        ("git diff --output=pwn", False),
        ("git log -p --output pwn", False),
        ("git grep -Ovim total", False),  # opens the matches with a program
        ("git diff --ext-diff HEAD", False),
        ("find . -maxdepth 0 -fprintf pwn x", False),
        ("find . -name '*.py' -okdir rm {} ;", False),
        ("find . -name '*.py' -print", True),
    ],
)
def test_read_only_commands(command: str, expected: bool) -> None:
    config = NavigatorSettings()
    assert read_only(command, config) is expected
    assert gated("bash", {"command": command}, config) is not expected
