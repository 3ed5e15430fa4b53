"""The driver with a navigator (issue 12): plan, permission gate, review, guidance, timeouts and turn limits, each run
end to end by `run_task` on a real repository, the driver and the navigator both scripted models."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import CART_FIX as FIX
from agent_script import CART_SUBMIT as SUBMIT
from agent_script import CART_TESTS as TESTS
from agent_script import CART_VIEW as VIEW
from agent_script import TEST_COMMAND, act, reflect
from navigator_support import CHEAT, PLAN, run
from openai_server import HANG, OpenAIServer

from llm_ide.inspector.load import load_run
from llm_ide.inspector.page import run_page


def shape(traj: dict[str, Any]) -> list[tuple[int, int | None, str, bool | None]]:
    return [(o["id"], o["parent_id"], o["action_type"], o["bad_action"]) for o in traj["operations"]]


def test_a_denied_edit_gets_a_sibling_alternative_that_is_approved_and_the_run_submits(tmp_path: Path) -> None:
    driver = [VIEW, reflect(False, "total sums price only."), CHEAT, FIX, reflect(False, "fixed"), TESTS]
    driver += [reflect(False, "tests pass"), SUBMIT]
    navigator = [
        *PLAN,
        "<deny>Changing the test hides the bug: fix Cart.total instead.</deny>",
        "<approve>This multiplies by the quantity, as planned.</approve>",
        "<approve>Running the tests is fine.</approve>",
    ]
    result, traj = run(tmp_path, driver, navigator, {}, agent={"single_call": False})

    assert result.exit_status == "submitted"
    assert "+            total += price * quantity" in result.submission and "test_cart" not in result.submission
    assert shape(traj) == [(0, None, "view", False), (1, 0, "edit", True), (2, 0, "edit", False),
                           (3, 2, "bash", False), (4, 3, "submit", None)]  # fmt: skip
    denied = traj["operations"][1]
    reason = "Changing the test hides the bug: fix Cart.total instead."
    assert denied["denied"] == {"reason": reason, "by": "model"}
    assert denied["lessons"] == reason and "denied it" in denied["observation"]
    assert "16.0" in (tmp_path / "repo/tests/test_cart.py").read_text()  # never run
    assert subprocess.run(TEST_COMMAND, shell=True, cwd=tmp_path / "repo").returncode == 0

    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act", "reflect", "act", "act", "reflect", "act", "reflect", "act"]
    assert "# Plan (from the navigator)\n1. In Cart.total multiply price by quantity." in calls[0]["prompt"]
    assert "## Alternative action" in calls[3]["prompt"] and f"denied it: {reason}" in calls[3]["prompt"]

    record = traj["info"]["navigator"]  # steps as the console numbers them: operations 1, 2, 3 (they said 1, 2, 3)
    assert [(d["step"], d["approved"], d["by"]) for d in record["decisions"]] == [
        (2, False, "model"), (3, True, "model"), (4, True, "model")
    ]  # fmt: skip
    assert record["decisions"][0]["reason"] == reason
    assert record["decisions"][0]["action"].startswith('edit {"path": "tests/test_cart.py"')
    assert record["usage"]["api_calls"] == 5 == len(record["calls"]) == record["turns"]
    assert [c["kind"] for c in record["calls"]][:2] == ["navigator_plan", "navigator_plan"]
    assert traj["info"]["model_stats"]["api_calls"] == len(driver)  # the driver's usage, apart
    assert record["plan"].startswith("1. In Cart.total")

    view = load_run(result.trajectory_path)  # the inspector: the denied mark, the navigator's records apart
    assert "denied" in view.nodes[1].marks and "failed" in view.nodes[1].marks
    assert view.navigator is not None and (view.navigator.calls, len(view.navigator.decisions)) == (5, 3)
    page = run_page(view)
    assert "Navigator (model): 3 decisions, 0 reviews, 5 model calls" in page and "hides the bug" in page


def test_in_single_call_a_denied_action_is_followed_by_the_alternative_instruction_and_an_action_alone(
    tmp_path: Path,
) -> None:
    """The navigator judged the denied edit: no verdict is asked on it, the alternative-action instruction follows."""
    driver = [VIEW, reflect(False, "total sums price only."), CHEAT, FIX, reflect(False, "fixed"), TESTS]
    driver += [reflect(False, "tests pass"), SUBMIT]  # a two-call script: each reflection joins the action after it
    navigator = [
        *PLAN,
        "<deny>Changing the test hides the bug.</deny>",
        "<approve>Yes.</approve>",
        "<approve>Ok.</approve>",
    ]
    result, traj = run(tmp_path, driver, navigator, {})
    assert result.exit_status == "submitted"
    assert shape(traj) == [(0, None, "view", False), (1, 0, "edit", True), (2, 0, "edit", False),
                           (3, 2, "bash", False), (4, 3, "submit", None)]  # fmt: skip
    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act"] * 5 == ["act"] * traj["info"]["model_stats"]["api_calls"]
    after_denial = calls[2]["prompt"].split("### Operation 1 (return code", 1)[1]
    assert "denied it: Changing the test hides the bug." in after_denial
    assert (
        "## Alternative action\nIn place of operation 1" in after_denial and "## Judge operation 1" not in after_denial
    )
    assert "## Judge operation 2, then act" in calls[3]["prompt"]
    replies = calls[4]["prompt"].split("[assistant]\n")
    assert replies[2].startswith("good: total sums price only.\nMake the test expect")
    assert replies[3].startswith("The loop ignores the quantity")  # no verdict on the denied edit
    assert replies[4].startswith("good: fixed\nRun the tests")  # the model's own verdict on the fix, in its reply


def test_a_failed_review_is_a_lesson_the_driver_fixes_then_the_reviewed_submit_passes(tmp_path: Path) -> None:
    review = act("Is reading enough?", "request_review", summary="I only read the code.")
    driver = [VIEW, reflect(False, "total sums price only."), review, FIX, reflect(False, "fixed"), SUBMIT]
    navigator = [
        *PLAN,
        "<fail>Nothing changed yet: total still ignores quantity.</fail>\n"
        "<plan>1. Edit line 14: price * quantity.</plan>",
        '<bash>{"command": "python3 -m unittest discover -s tests -t . 2>&1"}</bash>',
        "<pass>The tests pass.</pass>",
    ]
    result, traj = run(tmp_path, driver, navigator, {"gate": [], "review_on_submit": True})

    assert result.exit_status == "submitted"
    assert shape(traj) == [(0, None, "view", False), (1, 0, "request_review", False), (2, 1, "edit", False),
                           (3, 2, "submit", None)]  # fmt: skip
    ops = traj["operations"]
    assert ops[1]["review"] == {"round": 1, "passed": False, "by": "model",
                                "comment": "Nothing changed yet: total still ignores quantity."}  # fmt: skip
    assert ops[1]["lessons"] == "Nothing changed yet: total still ignores quantity."
    assert "review failed (round 1 of 3)" in ops[1]["observation"]
    assert ops[3]["review"]["passed"] is True and ops[3]["observation"] == "Submitted."
    record = traj["info"]["navigator"]
    assert [(r["round"], r["passed"], r["action"]) for r in record["reviews"]] == [
        (1, False, "request_review"), (2, True, "submit")
    ]  # fmt: skip
    assert "python3 -m unittest" in record["calls"][-2]["response"]  # the reviewer ran the tests
    prompts = [c["prompt"] for c in traj["model_calls"]]
    assert "1. In Cart.total multiply" in prompts[0]
    assert "# Plan (from the navigator)\n1. Edit line 14: price * quantity." in prompts[3]  # updated after the review
    assert record["plan"] == "1. Edit line 14: price * quantity."


def test_guidance_is_the_observation(tmp_path: Path) -> None:
    ask = act("Where is the bug?", "request_guidance", question="Which function is wrong?")
    driver = [ask, reflect(False, "told where"), SUBMIT]
    result, traj = run(tmp_path, driver, ["<answer>Cart.total, line 14.</answer>"], {"plan": False})
    assert result.exit_status == "submitted"
    assert traj["operations"][0]["observation"] == "The navigator answers: Cart.total, line 14."
    assert traj["info"]["navigator"]["guidance"][0]["answer"] == "Cart.total, line 14."


@pytest.mark.parametrize(
    ("nav", "driver", "navigator", "ended", "steps"),
    [
        ({"max_turns": 2}, [VIEW, reflect(False, "ok"), FIX], PLAN, "its 2 turns", 1),
        (
            {"max_driver_turns": 2, "gate": ["edit"]},
            [VIEW, reflect(False, "ok"), TESTS, reflect(False, "ok"), TESTS],
            PLAN,
            "2 driver operations without a review",
            2,
        ),
        (
            {"max_review_rounds": 1, "review_on_submit": True},
            [VIEW, reflect(False, "ok"), SUBMIT],
            [*PLAN, "<fail>Nothing is fixed.</fail>"],
            "1 review rounds failed",
            2,
        ),
    ],
)
def test_turn_limits_end_the_run_cleanly_with_their_own_exit_status(
    tmp_path: Path, nav: dict, driver: list[str], navigator: list[str], ended: str, steps: int
) -> None:
    result, traj = run(tmp_path, driver, navigator, nav)
    assert result.exit_status == "turn_limit" == traj["info"]["exit_status"]
    assert ended in traj["info"]["navigator"]["ended"] and ended in result.error
    assert traj["info"]["n_operations"] == steps
    assert result.submission == ""


@pytest.mark.parametrize(("decision", "applied", "driver_calls"), [("deny", False, 2), ("allow", True, 2)])
def test_a_navigator_model_that_times_out_gets_timeout_decision(
    tmp_path: Path, decision: str, applied: bool, driver_calls: int
) -> None:
    driver = [FIX, SUBMIT] if decision == "deny" else [FIX, reflect(False, "fixed"), SUBMIT]
    with OpenAIServer(replies=[HANG], hang_seconds=30) as server:
        nav = {"model": "navigator-test", "base_url": server.url, "plan": False, "timeout_decision": decision}
        model = {"timeout": 0.2, "max_retries": 0}  # the navigator's model: nothing comes (the driver is scripted)
        result, traj = run(tmp_path, driver, None, nav, model=model)
    assert result.exit_status == "submitted"
    assert ("price * quantity" in (tmp_path / "repo/shop/cart.py").read_text()) is applied
    (entry,) = traj["info"]["navigator"]["decisions"]
    assert (entry["approved"], entry["by"]) == (applied, "timeout")
    assert f"applied timeout_decision: {decision}" in entry["reason"]
    assert (traj["operations"][0].get("denied") is None) is applied
    assert traj["info"]["model_stats"]["api_calls"] == driver_calls


def test_without_a_navigator_the_graph_and_the_records_are_unchanged(tmp_path: Path) -> None:
    driver = [act("Ask.", "request_review", summary="x"), reflect(False, "no navigator"), SUBMIT]
    result, traj = run(tmp_path, driver, None, {"mode": "off"})
    assert result.exit_status == "submitted"
    assert "navigator" not in traj["info"]
    assert traj["operations"][0]["observation"].startswith("No navigator in this run")
    assert "request_review" not in json.dumps(traj["model_calls"][0]["prompt"])
