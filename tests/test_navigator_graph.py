"""The driver with a navigator (issue 12): plan, permission gate, review, guidance, timeouts and turn limits, each run
end to end by `run_task` on a real repository, the driver and the navigator both scripted models."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import (
    BUGGY_FILES,
    TEST_COMMAND,
    act,
    reflect,
    write_script,
)
from agent_script import (
    CART_FIX as FIX,
)
from agent_script import (
    CART_SUBMIT as SUBMIT,
)
from agent_script import (
    CART_TESTS as TESTS,
)
from agent_script import (
    CART_VIEW as VIEW,
)
from conftest import make_git_repo
from in_process import invoke
from openai_server import HANG, OpenAIServer, Reply

from llm_ide.cli.console import navigator_text, navigator_usage
from llm_ide.config import load_config
from llm_ide.inspector.load import load_run, navigator_view
from llm_ide.inspector.page import run_page
from llm_ide.navigator.protocol import NavigatorUsage
from llm_ide.run.single import RunResult, run_task
from llm_ide.run.trajectory import load_trajectory

CHEAT = act(
    "Make the test expect what the code returns[1](tests/test_cart.py:11).",
    "edit",
    path="tests/test_cart.py",
    old="16.0",
    new="11.5",
)
PLAN = [
    '<view>{"path": "shop/cart.py"}</view>',
    "<plan>1. In Cart.total multiply price by quantity.\n2. Run the unit tests.</plan>",
]


def run(
    tmp_path: Path, driver: list[str], navigator: list[str] | None, nav: dict[str, Any], **kw: Any
) -> tuple[RunResult, dict[str, Any]]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_git_repo(repo, BUGGY_FILES)
    if navigator is not None:
        nav = {"model": write_script(tmp_path / "navigator.yaml", navigator), **nav}
    settings = load_config("default", environment={"tools": []}, navigator={"mode": "model", **nav}, **kw)
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "driver.yaml", driver),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="nav",
        repo=repo,
    )
    return result, load_trajectory(result.trajectory_path)


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
        model = {"timeout": 0.5, "max_retries": 0}
        result, traj = run(tmp_path, driver, None, nav, model=model)
    assert result.exit_status == "submitted"
    assert ("price * quantity" in (tmp_path / "repo/shop/cart.py").read_text()) is applied
    (entry,) = traj["info"]["navigator"]["decisions"]
    assert (entry["approved"], entry["by"]) == (applied, "timeout")
    assert f"applied timeout_decision: {decision}" in entry["reason"]
    assert (traj["operations"][0].get("denied") is None) is applied
    assert traj["info"]["model_stats"]["api_calls"] == driver_calls


def test_the_runs_cost_limit_counts_the_navigators_calls_with_the_drivers(tmp_path: Path) -> None:
    """The navigator's plan alone spends $1 of a $0.50 limit: the run ends `cost_limit` before the driver's first call
    (it went on to submit, the limit checked against the driver's $0 only)."""
    plan = Reply(text=PLAN[1], input_tokens=1000, output_tokens=0)
    with OpenAIServer(replies=[plan]) as server:
        nav = {"model": "navigator-test", "base_url": server.url, "gate": []}
        prices = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        driver = [FIX, reflect(False, "fixed"), SUBMIT]
        result, traj = run(tmp_path, driver, None, nav, model=prices, agent={"cost_limit": 0.5})
    assert result.exit_status == "cost_limit" == traj["info"]["exit_status"]
    assert "the navigator $1.0000" in result.error
    assert traj["info"]["model_stats"]["api_calls"] == 0 and traj["info"]["navigator"]["usage"]["cost"] == 1.0


def test_the_runs_token_limit_counts_the_navigators_tokens_with_the_drivers(tmp_path: Path) -> None:
    """The navigator's plan alone takes 1,000 tokens of a 500-token limit: the run ends `cost_limit` before the
    driver's first call (the token limit counted the driver's tokens only, while the cost limit counted both)."""
    plan = Reply(text=PLAN[1], input_tokens=900, output_tokens=100)
    with OpenAIServer(replies=[plan]) as server:
        nav = {"model": "navigator-test", "base_url": server.url, "gate": []}
        driver = [FIX, reflect(False, "fixed"), SUBMIT]
        result, traj = run(tmp_path, driver, None, nav, agent={"token_limit": 500})
    assert result.exit_status == "cost_limit" == traj["info"]["exit_status"]
    assert result.error == "the run's token limit (500) is reached (1,000 tokens: the driver 0, the navigator 1,000)"
    assert traj["info"]["model_stats"]["api_calls"] == 0


PRICED_PLAN = Reply(text=PLAN[1], input_tokens=1000, output_tokens=0)  # $1 at priced_navigator_run's price


def priced_navigator_run(tmp_path: Path, url: str) -> list[str]:
    """`run`'s arguments for the buggy repository (made in `tmp_path`), the driver's fix and a navigator at `url` whose
    plan (`PRICED_PLAN`) costs $1, thread `t`."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    nav = {"mode": "model", "model": "navigator-test", "base_url": url, "gate": []}
    prices = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
    config = tmp_path / "nav.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "navigator": nav, "model": prices}))
    driver = write_script(tmp_path / "driver.yaml", [FIX, reflect(False, "fixed"), SUBMIT])
    task = ["--task", "Cart.total ignores quantities."]
    return ["--repo", "repo", *task, "--model", driver, "-c", str(config), "--thread-id", "t"]


def test_a_run_its_navigator_brought_to_its_cost_limit_prints_the_command_that_goes_on(tmp_path: Path) -> None:
    with OpenAIServer(replies=[PRICED_PLAN]) as server:
        args = priced_navigator_run(tmp_path, server.url)
        done = invoke("run", *args, "--cost-limit", "0.5", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert "the run's cost limit $0.5000 is reached" in said and said.rstrip().endswith("--thread-id t --cost-limit 2")


def test_a_cost_limit_says_an_unpriced_drivers_part_unpriced_not_zero(tmp_path: Path) -> None:
    """The navigator's $1 plan stops the run at its $0.50 limit before the driver's first call; the driver's model has
    no price in `model.prices`: its part was said `$0.0000`, a cost nobody knows."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=[PRICED_PLAN]) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": []}
        prices = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        limit = {"cost_limit": 0.5}
        settings = load_config("default", environment={"tools": []}, navigator=nav, model=prices, agent=limit)
        result = run_task(
            "Cart.total ignores quantities.",
            model="driver-test",
            base_url=server.url,
            settings=settings,
            output_dir=tmp_path / "out",
            run_id="nav",
            repo=tmp_path / "repo",
        )
    said = "the run's cost limit $0.5000 is reached (spent $1.0000: the driver unpriced, the navigator $1.0000)"
    assert (result.exit_status, result.error) == ("cost_limit", said)


def test_an_unpriced_navigators_cost_is_said_unpriced_not_zero(tmp_path: Path) -> None:
    """A navigator whose model has no price in `model.prices` beside a driver that is priced (a scripted one): the
    run's last line said `its navigator: 1 model call, 1000+0 tokens, $0.0000`, a cost of nothing."""
    with OpenAIServer(replies=[PRICED_PLAN]) as server:
        args = priced_navigator_run(tmp_path, server.url)
        config = tmp_path / "nav.yaml"
        config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "model": {}}))
        done = invoke("run", *args, cwd=tmp_path)
    assert "its navigator: 1 model call, 1000+0 tokens, unpriced" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(("limit", "going_on"), [("0.5", False), ("1.5", True)])
def test_a_run_its_navigator_stopped_at_its_cost_limit_goes_on_only_under_a_limit_above_both_costs(
    tmp_path: Path, limit: str, going_on: bool
) -> None:
    """A run the navigator's $1 plan stopped at its $0.50 cost limit went on when run again under that same limit (the
    limit no longer reached by the driver's $0 alone): the driver's next call was made past the limit, every time."""
    with OpenAIServer(replies=[PRICED_PLAN]) as server:
        args = priced_navigator_run(tmp_path, server.url)
        invoke("run", *args, "--cost-limit", "0.5", cwd=tmp_path)
        again = invoke("run", *args, "--cost-limit", limit, cwd=tmp_path)
    traj = load_trajectory(tmp_path / "runs" / "t" / "t.traj.json")
    said = again.stdout + again.stderr
    assert ("it goes on, under the limits given now" in said) == going_on, said
    assert traj["info"]["exit_status"] == ("submitted" if going_on else "cost_limit"), said
    assert traj["info"]["model_stats"]["api_calls"] == (2 if going_on else 0)


def test_the_console_and_inspect_show_the_navigators_spend_beside_the_drivers(tmp_path: Path) -> None:
    """The navigator's plan costs $1, the driver's calls $0: the run's last line and `inspect` said $0.0000 only (the
    HTML page alone showed the navigator's)."""
    with OpenAIServer(replies=[PRICED_PLAN]) as server:
        args = priced_navigator_run(tmp_path, server.url)
        done = invoke("run", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    navigator = "its navigator: 1 model call, 1000+0 tokens, $1.0000"
    (last,) = [line for line in done.stdout.splitlines() if line.startswith("submitted after ")]
    assert last.endswith(f", $0.0000; {navigator}"), last
    shown = invoke("inspect", str(tmp_path / "runs" / "t" / "t.traj.json"), env={**os.environ, "COLUMNS": "200"})
    assert f"$0.0000; {navigator}" in shown.stdout, shown.stdout


def test_without_a_navigator_the_graph_and_the_records_are_unchanged(tmp_path: Path) -> None:
    driver = [act("Ask.", "request_review", summary="x"), reflect(False, "no navigator"), SUBMIT]
    result, traj = run(tmp_path, driver, None, {"mode": "off"})
    assert result.exit_status == "submitted"
    assert "navigator" not in traj["info"]
    assert traj["operations"][0]["observation"].startswith("No navigator in this run")
    assert "request_review" not in json.dumps(traj["model_calls"][0]["prompt"])


@pytest.mark.parametrize("key", ["api_calls", "calls"])
def test_the_navigators_calls_are_api_calls_as_the_drivers_and_a_record_of_before_reads(key: str) -> None:
    """The navigator's usage said `calls` where the driver's says `api_calls`; a trajectory or checkpoint written
    before (`calls`) reads the same."""
    usage = {key: 2, "input_tokens": 10, "cached_tokens": 0, "output_tokens": 5, "cost": 0.5}
    assert NavigatorUsage(**usage).model_dump()["api_calls"] == 2
    assert navigator_text(navigator_usage({"navigator": {"usage": usage}}), True) == (
        "; its navigator: 2 model calls, 10+5 tokens, $0.5000"
    )
    view = navigator_view({"mode": "model", "usage": usage})
    assert view is not None and view.calls == 2


def test_the_navigators_cache_reads_are_named_as_the_drivers_in_its_record(tmp_path: Path) -> None:
    """The navigator's usage said `cached_tokens` where the driver's model_stats and calls say `cache_read_tokens`:
    the driver's name now in what a run writes (the name of before beside it, for a reader of before)."""
    cached = Reply(text=PLAN[1], input_tokens=1000, output_tokens=0, cached_tokens=400)
    with OpenAIServer(replies=[cached]) as server:
        done = invoke("run", *priced_navigator_run(tmp_path, server.url), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    info = json.loads((tmp_path / "runs" / "t" / "t.traj.json").read_text())["info"]
    assert "cache_read_tokens" in info["model_stats"]
    usage = info["navigator"]["usage"]
    assert usage["cache_read_tokens"] == usage["cached_tokens"] == 400


@pytest.mark.parametrize("key", ["cache_read_tokens", "cached_tokens"])
def test_a_navigators_usage_of_before_reads_its_cache_reads(key: str) -> None:
    """A record, checkpoint or server answer of before (`cached_tokens`) reads the same."""
    usage = NavigatorUsage.model_validate({"api_calls": 1, key: 7})
    assert usage.cache_read_tokens == 7 and NavigatorUsage(**usage.model_dump()) == usage


def test_a_navigator_call_whose_stream_was_cut_is_in_its_usage_and_its_calls(tmp_path: Path) -> None:
    """The navigator's plan streamed in part, cut by a dying server, then asked again: the provider bills the cut one
    too, and the run's budget was charged with it, but the navigator's usage and calls (the trajectory's, the
    console's `its navigator: …`) counted the retried reply alone."""
    with OpenAIServer(replies=[Reply(text=PLAN[1], cut=3), PRICED_PLAN]) as server:
        args = priced_navigator_run(tmp_path, server.url)
        config = yaml.safe_load((tmp_path / "nav.yaml").read_text())
        config["model"] |= {"stream": True, "retry_base_delay": 0.0, "max_retries": 1}
        (tmp_path / "nav.yaml").write_text(yaml.safe_dump(config))
        done = invoke("run", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(server.requests) == 2
    record = json.loads((tmp_path / "runs" / "t" / "t.traj.json").read_text())["info"]["navigator"]
    assert [call.get("finish_reason") for call in record["calls"]] == ["cut", None]
    assert record["usage"]["api_calls"] == 2 and record["usage"]["cost"] > 1.0
    assert record["usage"]["cost"] == pytest.approx(sum(call["cost"] for call in record["calls"]))
