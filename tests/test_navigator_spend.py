"""What a navigator spends (issue 12): its calls, tokens and cost counted in the run's limits, said on the console,
in `inspect` and in its record (cache reads, a cut stream), a run its plan stopped going on under a higher limit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from agent_script import BUGGY_FILES, reflect, write_script
from agent_script import CART_FIX as FIX
from agent_script import CART_SUBMIT as SUBMIT
from conftest import make_git_repo
from in_process import invoke
from navigator_support import PLAN, run
from openai_server import OpenAIServer, Reply

from llm_ide.cli.console import navigator_text, navigator_usage
from llm_ide.config import load_config
from llm_ide.inspector.load import navigator_view
from llm_ide.navigator.protocol import NavigatorUsage
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory


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
