"""Every bundled variant beside every other, end to end on a real repository with scripted models and the settings
that matter on: the navigator plans and gates (it denies an edit that would hide the bug, its alternative is
approved), action sampling asks for two candidates, the message channel brings another agent's note, a given
reproduction script runs before, on demand and at submit, demonstrations lead the prompt, attempts are reviewed.
Whatever the pair, the denied edit never runs, its alternative fixes the bug, and the run submits the fix."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, CART_FIX, CART_SUBMIT, CART_TESTS, CART_VIEW, act, reflect, single_call
from attempts_scripts import review
from conftest import make_git_repo
from navigator_support import CHEAT
from variants_support import mailbox

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.messages.variant import Messages
from llm_ide.reproduction.script import script
from llm_ide.reproduction.variant import Reproduction
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

VARIANTS = ("navigator", "sampling", "messages", "reproduction", "demonstrations", "attempts")
PAIRS = list(itertools.combinations(VARIANTS, 2))
TASK = "Cart.total ignores quantities."
FIXED = "total += price * quantity"
REPRODUCE = (
    "from shop.cart import Cart\ncart = Cart()\ncart.add('pen', 1.5, 4)\nassert cart.total() == 6.0, cart.total()\n"
)
PLAN = ['<view>{"path": "shop/cart.py"}</view>', "<plan>1. Multiply price by quantity in Cart.total.\n2. Test.</plan>"]


def driver(on: set[str]) -> list[str]:
    """The agent's replies (one per step): with the navigator the cheat first (denied: its alternative follows)."""
    steps = [CART_VIEW, reflect(False, "total sums price only.")]
    if "navigator" in on:
        steps += [CHEAT]  # denied: never run, judged as it ran (no verdict on it in the next reply)
    steps += [CART_FIX, reflect(False, "fixed")]
    if "reproduction" in on:
        steps += [act("Check the issue is gone.", "reproduce"), reflect(False, "resolved")]
    steps += [CART_TESTS, reflect(False, "tests pass"), CART_SUBMIT]
    replies = single_call(steps)
    return [reply for item in replies for reply in [item] * (2 if "sampling" in on else 1)]  # k=2 samples agree


def navigator_script() -> list[str]:
    decisions = ["<deny>Changing the test hides the bug.</deny>", "<approve>Fix it in Cart.total.</approve>"]
    return [*PLAN, *decisions, "<approve>Run them.</approve>"]


def write(path: Path, replies: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"responses": replies}))
    return f"scripted:{path}"


@pytest.fixture(scope="session")
def demonstration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demonstration")
    model = write(folder / "script.json", driver(set()))
    settings = load_config("default", environment={"tools": []})
    result = run_task(TASK, model=model, settings=settings, output_dir=folder / "out", run_id="demo",
                      repo=make_git_repo(folder / "repo", BUGGY_FILES))  # fmt: skip
    assert result.exit_status == "submitted"
    return result.trajectory_path


def run(tmp_path: Path, on: set[str], demonstration: Path) -> tuple[Any, dict[str, Any], Path]:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    config: dict[str, Any] = {"environment": {"tools": []}}
    if "navigator" in on:
        config["navigator"] = {"mode": "model", "model": write(tmp_path / "navigator.json", navigator_script())}
    if "sampling" in on:
        config["sampling"] = {"k": 2}
    if "demonstrations" in on:
        config["demonstrations"] = [str(demonstration)]
    given = [Messages(mailbox(tmp_path))] if "messages" in on else []
    given += [Reproduction(script(REPRODUCE))] if "reproduction" in on else []
    fields = {"output_dir": tmp_path / "out", "run_id": "pair", "repo": repo, "variants": given}
    if "attempts" in on:
        config["attempts"] = {"max": 2, "accept_score": 8}
        write(tmp_path / "scripts" / "attempt1.json", driver(on))
        write(tmp_path / "scripts" / "attemptreview.json", [review(9, "Multiplies by the quantity.")])
        for never_asked in ("attempt2", "attemptchoose"):  # (the first attempt is accepted) checked before the run
            write(tmp_path / "scripts" / f"{never_asked}.json", ["never asked"])
        model = f"scripted:{tmp_path}/scripts/attempt{{attempt}}.json"
        result = run_attempts(TASK, model=model, settings=load_config("default", **config), **fields)
        trajectory = tmp_path / "out" / "attempt1" / "pair-attempt1.traj.json"
    else:
        model = write(tmp_path / "driver.json", driver(on))
        result = run_task(TASK, model=model, settings=load_config("default", **config), **fields)
        trajectory = result.trajectory_path
    return result, load_trajectory(trajectory), repo


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_every_pair_of_variants_runs_end_to_end(tmp_path: Path, demonstration: Path, first: str, second: str) -> None:
    on = {first, second}
    result, traj, repo = run(tmp_path, on, demonstration)
    assert result.exit_status == "submitted", result.error
    assert FIXED in result.submission and "test_cart" not in result.submission
    assert "16.0" in (repo / "tests" / "test_cart.py").read_text()  # the denied cheat never ran
    ops = traj["operations"]
    kinds = ["view", *(["edit"] if "navigator" in on else []), "edit", *(["reproduce"] if "reproduction" in on else [])]
    assert [op["action_type"] for op in ops] == [*kinds, "bash", "submit"]
    if "navigator" in on:
        denied, fix = ops[1], ops[2]
        assert (denied["bad_action"], denied["returncode"], denied["denied"]["by"]) == (True, -1, "model")
        assert (fix["parent_id"], fix["action_params"]["path"]) == (denied["parent_id"], "shop/cart.py")  # its sibling
        assert traj["info"]["navigator"]["plan"].startswith("1. Multiply price")
    if "sampling" in on:
        assert all(op["candidates"][0]["samples"] == 2 and op["choice"]["method"] == "unanimous" for op in ops)
    first_prompt = traj["model_calls"][0]["prompt"]
    assert ("I changed nothing in shop/" in first_prompt) is ("messages" in on)
    assert first_prompt.startswith("[system]\n## Demonstrations") is ("demonstrations" in on)
    if "reproduction" in on:
        record = traj["info"]["reproduction"]
        assert record["scripts"][0]["before"]["verdict"] == "reproduced"
        assert record["after"]["reproduce.py"]["verdict"] == "resolved"
        assert next(op for op in ops if op["action_type"] == "reproduce")["returncode"] == 0
    if "attempts" in on:
        assert [(a["index"], a["score"]) for a in result.attempts] == [(1, 9.0)] and result.chosen == 1
