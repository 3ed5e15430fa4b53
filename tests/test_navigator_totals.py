"""A run's totals count every call its navigator paid for, however the run ends: an error in the navigator's node, a
call cut short. Real runs (`llm-ide run`), the scripted model or a model on loopback HTTP."""

from __future__ import annotations

import os
import re
import subprocess
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import BUGGY_FILES, CART_FIX, CART_SUBMIT, FIX_SCRIPT, reflect, single_call, write_script
from attempts_scripts import review, scripts
from conftest import make_git_repo
from in_process import invoke
from openai_server import CtrlCAtPiece, OpenAIServer, Reply

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import usd
from llm_ide.inspector.load import load_run
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

VIEW = '<view>{"path": "shop/cart.py"}</view>'
PLAN = "<plan>1. In Cart.total multiply price by quantity.</plan>"
DRIVER = [CART_FIX, reflect(False, "fixed"), CART_SUBMIT]


def navigator_run(tmp_path: Path, navigator: list[str], driver: list[str]) -> list[str]:
    """`run`'s arguments: the buggy repository, a scripted driver and a scripted model navigator, thread `t`."""
    if not (tmp_path / "repo").exists():
        make_git_repo(tmp_path / "repo", BUGGY_FILES)
    nav = {"mode": "model", "model": write_script(tmp_path / "nav.yaml", navigator), "gate": []}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}, "navigator": nav}))
    task = ["--task", "Cart.total ignores quantities.", "--thread-id", "t"]
    return ["--repo", "repo", *task, "--model", write_script(tmp_path / "s1.yaml", driver), "-c", "config.yaml"]


def test_a_run_its_navigator_ended_in_an_error_counts_the_calls_it_made(tmp_path: Path) -> None:
    """The navigator's script ran out as it planned, after 2 calls: the run ended `error after 0 model calls, 0+0
    tokens` alone, its trajectory without `info.navigator` (the plan node's update lost with its error), so neither
    the last line nor the inspector counted them; resumed, its state had not kept them either."""
    done = invoke("run", *navigator_run(tmp_path, [VIEW, VIEW], DRIVER), cwd=tmp_path)
    said = done.stdout + done.stderr
    assert "error after 0 model calls, 0+0 tokens, $0.0000; its navigator: 2 model calls" in said, said
    path = tmp_path / "runs" / "t" / "t.traj.json"
    record = load_trajectory(path)["info"]["navigator"]
    assert (record["usage"]["api_calls"], record["turns"], len(record["calls"])) == (2, 2, 2)
    view = load_run(path).navigator
    assert view is not None and view.calls == 2

    again = invoke("run", *navigator_run(tmp_path, [VIEW, VIEW, PLAN], DRIVER), cwd=tmp_path)  # goes on from its state
    info = load_trajectory(path)["info"]
    assert info["exit_status"] == "submitted", again.stdout + again.stderr
    assert "resuming run t before its first step" in again.stdout  # (was `after step 0`)
    record = info["navigator"]
    assert record["plan"].startswith("1. In Cart.total"), again.stdout + again.stderr
    assert record["usage"]["api_calls"] == len(record["calls"]) == 2 + 3  # the plan asked again: 3 calls more


def priced_navigator_run(
    tmp_path: Path, url: str, navigator: dict[str, Any], listener: Any = None, attempts: int | None = None
) -> Any:
    """The driver's script run on tmp_path/repo with a priced, streaming model navigator at `url` (no retries); with
    `attempts`, as attempts (`run_attempts`, at most that many)."""
    nav = {"mode": "model", "model": "navigator-test", "base_url": url, "gate": [], **navigator}
    prices = {"navigator-test": {"input": 1000.0, "output": 0.0}}
    model = {"stream": True, "max_retries": 0, "prices": prices}
    tried = {} if attempts is None else {"attempts": {"max": attempts}}
    return (run_task if attempts is None else run_attempts)(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "driver.yaml", DRIVER),
        settings=load_config("default", environment={"tools": []}, navigator=nav, model=model, **tried),
        output_dir=tmp_path / "out",
        run_id="nav",
        repo=tmp_path / "repo",
        on_model_call=listener,
    )


@pytest.mark.parametrize("attempts", [1, 2])
@pytest.mark.parametrize("how", ["interrupted", "cut"])
def test_a_navigator_call_cut_short_is_in_the_runs_navigator_record(tmp_path: Path, how: str, attempts: int) -> None:
    """Ctrl-C as the navigator's plan streamed in, or its server dying mid-stream (no retry left): the part it paid for
    reached its usage and the run's budget, but not the record the run saves, so the trajectory's `info.navigator`
    had no call at all. With attempts, the attempt's run (its own `Driver`) saves it in the attempt's trajectory."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    words = f"{PLAN} " + "and then more words " * 20
    reply = Reply(text=words, pace=0.01) if how == "interrupted" else Reply(text=words, cut=3)
    stopped = pytest.raises(KeyboardInterrupt) if how == "interrupted" else nullcontext()
    with OpenAIServer(replies=[reply]) as server, stopped:
        listener = CtrlCAtPiece() if how == "interrupted" else None
        priced_navigator_run(tmp_path, server.url, {}, listener, attempts=attempts)
    own = tmp_path / "out" / ("nav.traj.json" if attempts == 1 else "attempt1/nav-attempt1.traj.json")
    record = load_trajectory(own)["info"]["navigator"]
    assert [call["finish_reason"] for call in record["calls"]] == [how]
    assert record["usage"]["api_calls"] == 1 and record["usage"]["cost"] == record["calls"][0]["cost"] > 0


def test_a_review_call_its_deadline_cut_short_is_in_the_navigators_usage(tmp_path: Path) -> None:
    """The review's reply streamed in part, then its deadline passed: the run goes on (`timeout_decision`), the part
    paid was kept in the record's calls but not counted in its usage (the timeout's answer has none)."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=[Reply(text="<pass>Fine as it is.</pass>", gate=str(tmp_path / "never"))]) as server:
        review = {"plan": False, "review_on_submit": True, "review_timeout": 0.5, "timeout_decision": "allow"}
        result = priced_navigator_run(tmp_path, server.url, review)
        (tmp_path / "never").touch()
    assert result.exit_status == "submitted", result.error
    record = load_trajectory(tmp_path / "out" / "nav.traj.json")["info"]["navigator"]
    assert [review["by"] for review in record["reviews"]] == ["timeout"] and len(record["calls"]) == 1
    assert record["usage"]["api_calls"] == 1 and record["usage"]["cost"] == record["calls"][0]["cost"] > 0


def two_planned_attempts(tmp_path: Path, plan: Reply) -> subprocess.CompletedProcess[str]:
    """`llm-ide run` (thread t) of two attempts, their drivers free, each planned by a navigator ($1 per 1,000 input
    tokens) that replies `plan`."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    driver = scripts(tmp_path / "scripts", [DRIVER, DRIVER], [review(3, "Hm."), review(4, "Fine.")])
    with OpenAIServer(replies=[plan]) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": []}
        model = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        config = {"environment": {"tools": []}, "navigator": nav, "model": model, "attempts": {"max": 2}}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["--task", "Cart.total ignores quantities.", "--model", driver, "-c", "config.yaml", "--thread-id", "t"]
        done = invoke("run", "--repo", "repo", *args, cwd=tmp_path)
    return done


def test_a_run_with_attempts_says_what_its_attempts_navigators_spent(tmp_path: Path) -> None:
    """Two attempts, each planned by a priced model navigator: each attempt's trajectory had its navigator's usage, the
    run's own none, so its last line, its trajectory and `inspect` said the drivers' spend alone."""
    done = two_planned_attempts(tmp_path, Reply(text=PLAN, input_tokens=1000, output_tokens=7, cached_tokens=400))
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "runs" / "t"
    own = [load_trajectory(out / f"attempt{n}" / f"t-attempt{n}.traj.json")["info"]["navigator"] for n in (1, 2)]
    cost = sum(record["usage"]["cost"] for record in own)
    assert cost > 0 and all(record["usage"]["api_calls"] == 1 for record in own)
    usage = load_trajectory(out / "t.traj.json")["info"]["navigator"]["usage"]
    summed = {"api_calls": 2, "input_tokens": 2000, "cache_read_tokens": 800, "output_tokens": 14, "cost": cost}
    assert {key: usage[key] for key in summed} == summed
    navigator = f"; its navigator: 2 model calls, 2000+14 tokens, {usd(cost)}"
    (last,) = [line for line in done.stdout.splitlines() if line.startswith("submitted after ")]
    assert last.endswith(navigator), last
    shown = invoke("inspect", str(out / "t.traj.json"), env={**os.environ, "COLUMNS": "200"})
    assert navigator in shown.stdout, shown.stdout
    view = load_run(out / "t.traj.json").navigator
    assert view is not None and (view.calls, view.tokens, view.cost) == (2, 2014, cost)


def test_a_task_its_attempts_navigators_brought_to_its_cost_limit_stays_there_when_run_again(tmp_path: Path) -> None:
    """The first attempt's navigator spends the task's $1 `attempts.cost_limit` on its plan: run again under the same
    limit, the task took its spending for $0 (its attempts' drivers' alone), so attempt 1 went on and attempt 2's
    navigator paid $1 more."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    driver = scripts(tmp_path / "scripts", [DRIVER, DRIVER], [review(3, "Hm."), review(4, "Fine.")])
    plan = Reply(text=PLAN, input_tokens=1000, output_tokens=0)
    with OpenAIServer(replies=[plan]) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": []}
        model = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        tried = {"max": 2, "cost_limit": 1.0}
        settings = load_config("default", environment={"tools": []}, navigator=nav, model=model, attempts=tried)
        for _ in range(2):
            result = run_attempts(
                "Cart.total ignores quantities.",
                model=driver,
                settings=settings,
                output_dir=tmp_path / "out",
                run_id="nav",
                repo=tmp_path / "repo",
            )
            assert result.exit_status == "cost_limit", result.error
    assert len(server.requests) == 1
    assert [(a["index"], a["exit_status"]) for a in result.attempts] == [(1, "cost_limit")]


@pytest.mark.parametrize("server", ["anthropic", "no usage"])
def test_a_navigators_cache_writes_and_estimated_calls_are_in_its_usage_and_said(tmp_path: Path, server: str) -> None:
    """The navigator's usage had no `cache_write_tokens` nor `estimated_calls`, which the driver's has: the tokens
    an Anthropic navigator wrote to its cache were not in its record, and a call whose usage was estimated (a server
    that sent none) was said as exact, in the run's last line and in `inspect`."""
    pytest.importorskip("langchain_anthropic")
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    anthropic = server == "anthropic"
    plan = Reply(text=PLAN, input_tokens=1000, output_tokens=7, cache_write_tokens=300, usage=anthropic)
    with OpenAIServer(replies=[plan]) as endpoint:
        url = endpoint.url.removesuffix("/v1") if anthropic else endpoint.url
        name = "anthropic:claude-haiku-4-5" if anthropic else "navigator-test"
        nav = {"mode": "model", "model": name, "base_url": url, "gate": []}
        config = {"environment": {"tools": []}, "navigator": nav, "model": {"stream": False}}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        driver = write_script(tmp_path / "driver.yaml", DRIVER)
        args = ["--task", "Cart.total ignores quantities.", "--model", driver, "-c", "config.yaml", "--thread-id", "t"]
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test", "COLUMNS": "200"}
        done = invoke("run", "--repo", "repo", *args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    path = tmp_path / "runs" / "t" / "t.traj.json"
    usage = load_trajectory(path)["info"]["navigator"]["usage"]
    assert (usage["cache_write_tokens"], usage["estimated_calls"]) == ((300, 0) if anthropic else (0, 1))
    (last,) = [line for line in done.stdout.splitlines() if line.startswith("submitted after ")]
    shown = invoke("inspect", str(path), env=env).stdout
    for said in (last, shown):
        assert ("tokens (estimated), " in said.partition("its navigator:")[2]) is not anthropic, said


def test_the_lines_of_a_run_with_attempts_say_what_each_attempt_spent_with_its_navigator(tmp_path: Path) -> None:
    """Two attempts, each planned by a priced navigator ($1 a plan), their drivers free: each step's line, each
    attempt's live line and each attempt's line at the end said $0.0000 (the driver's alone) while the run's last
    line said $1 a navigator; the attempts' lines now sum to the run's total."""
    done = two_planned_attempts(tmp_path, Reply(text=PLAN, input_tokens=1000, output_tokens=7))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[-1] for line in lines if line.lstrip().startswith("→ ")] == ["$1.0000"] * 4
    assert [line.split(", ")[1] for line in lines if " patch lines, " in line] == ["$1.0000"] * 2
    ends = [line for line in lines if line.startswith("attempt ") and ", score " in line]
    assert [line.split(", ")[2].removesuffix(" (chosen)") for line in ends] == ["$1.0000"] * 2, ends
    (last,) = [line for line in lines if line.startswith("submitted after ")]
    assert last.endswith("$0.0000; its navigator: 2 model calls, 2000+14 tokens, $2.0000"), last


@pytest.mark.parametrize("priced", ["navigator", "driver"])
def test_a_run_whose_driver_or_navigator_alone_has_a_price_says_both_parts(tmp_path: Path, priced: str) -> None:
    """The driver's model priced and the navigator's not (here with attempts), or the other way round: each step's
    line, each attempt's live and final line said the priced part alone (`$0.0000`) or `unpriced` alone (hiding
    the navigator's $1 plan); they now say `$X + unpriced`."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    plan = Reply(text=PLAN, input_tokens=1000, output_tokens=7)
    replies = [plan, *single_call(FIX_SCRIPT)] if priced == "navigator" else [plan]
    with OpenAIServer(replies=replies) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": []}
        prices = {"navigator-test": {"input": 1000.0, "output": 0.0}} if priced == "navigator" else {}
        config = {"environment": {"tools": []}, "navigator": nav, "model": {"prices": prices}}
        if priced == "navigator":
            driver = ["--model", "gpt-free", "--base-url", server.url]
        else:
            config["attempts"] = {"max": 2}
            driver = ["--model", scripts(tmp_path / "scripts", [DRIVER, DRIVER], [review(3, "Hm."), review(4, "Ok.")])]
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["--task", "Cart.total ignores quantities.", *driver, "-c", "config.yaml", "--thread-id", "t"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"LLM_IDE_CONFIG": "off"}
        done = invoke("run", "--repo", "repo", *args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines, known = done.stdout.splitlines(), "$1.0000" if priced == "navigator" else "$0.0000"
    steps = [line for line in lines if line.lstrip().startswith("→ ")]
    assert steps and all(
        line.endswith(f"tokens, {known} + unpriced" if priced == "navigator" else f"  {known} + unpriced")
        for line in steps
    ), steps
    if priced == "driver":
        assert [line.split(", ")[1] for line in lines if " patch lines, " in line] == [f"{known} + unpriced"] * 2
        ends = [line.removesuffix(" (chosen)") for line in lines if line.startswith("attempt ") and ", score " in line]
        assert [line.split(", ")[2] for line in ends] == [f"{known} + unpriced"] * 2, ends


def test_the_run_page_says_a_navigator_of_no_price_unpriced_and_its_estimated_calls(tmp_path: Path) -> None:
    """The inspector's page said the navigator's cost in dollars ($0.0000 for a model of no price: unknown, not
    nothing) and its tokens as exact when its server sent no usage."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=[Reply(text=PLAN, usage=False)]) as endpoint:
        nav = {"mode": "model", "model": "navigator-test", "base_url": endpoint.url, "gate": []}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}, "navigator": nav}))
        driver = write_script(tmp_path / "driver.yaml", DRIVER)
        args = ["--task", "Cart.total ignores quantities.", "--model", driver, "-c", "config.yaml", "--thread-id", "t"]
        done = invoke("run", "--repo", "repo", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    path, page = tmp_path / "runs" / "t" / "t.traj.json", tmp_path / "t.html"
    view = load_run(path).navigator
    assert view is not None and (view.priced, view.estimated) == (False, 1)
    assert invoke("inspect", str(path), "--html", str(page)).returncode == 0
    summary = page.read_text().partition('id="navigator"><summary>')[2].partition("</summary>")[0]
    said = re.search(r"\b1 model call, \d+ tokens \(estimated for 1 call\), unpriced$", summary)  # (`1 model calls`)
    assert said is not None and "$" not in summary, summary


def test_the_lines_of_a_run_with_attempts_sum_to_its_total_with_its_reviews(tmp_path: Path) -> None:
    """Two free attempts, each reviewed by a priced reviewer ($1 a review): the run's total said $2 and its
    attempts' lines $0 each, with nothing saying where the $2 went; a line now says the reviews' and choice's cost."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    driver = scripts(tmp_path / "scripts", [DRIVER, DRIVER], [])
    reviewed = Reply(text=review(3, "Hm."), input_tokens=1000, output_tokens=0)
    with OpenAIServer(replies=[reviewed]) as server:
        attempts = {"max": 2, "choose": "best_score", "reviewer": {"model": "reviewer-test"}}
        model = {"prices": {"reviewer-test": {"input": 1000.0, "output": 0.0}}}
        config = {"environment": {"tools": []}, "model": model, "attempts": attempts}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        args = ["--task", "Cart.total ignores quantities.", "--model", driver, "--base-url", server.url]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"LLM_IDE_CONFIG": "off"}
        done = invoke("run", "--repo", "repo", *args, "-c", "config.yaml", "--thread-id", "t", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("submitted after ")][0].endswith(", $2.0000"), lines
    ends = [
        line.removesuffix(" (chosen)").split(", ")[2]
        for line in lines
        if line.startswith("attempt ") and ", score" in line
    ]
    assert ends == ["$0.0000"] * 2 and "reviews and choice: $2.0000" in lines, lines


def test_the_run_pages_header_says_the_runs_total_with_its_driver_and_navigator_apart(tmp_path: Path) -> None:
    """A free (scripted) driver and a navigator paid $1: the page's header said `$0.0000`, the driver's cost alone, as
    if the navigator's dollar were not the run's (the console's line says both, the report their sum)."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=[Reply(text=PLAN, input_tokens=1000, output_tokens=0)]) as endpoint:
        nav = {"mode": "model", "model": "navigator-test", "base_url": endpoint.url, "gate": []}
        model = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        config = {"environment": {"tools": []}, "navigator": nav, "model": model}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        driver = write_script(tmp_path / "driver.yaml", DRIVER)
        args = ["--task", "Cart.total ignores quantities.", "--model", driver, "-c", "config.yaml", "--thread-id", "t"]
        done = invoke("run", "--repo", "repo", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "$0.0000; its navigator: 1 model call, 1000+0 tokens, $1.0000" in done.stdout, done.stdout
    path, page = tmp_path / "runs" / "t" / "t.traj.json", tmp_path / "t.html"
    assert invoke("inspect", str(path), "--html", str(page)).returncode == 0
    header = re.search(r"<span id=\"cost\">([^<]*)</span>", page.read_text())
    assert header is not None and header[1] == "$1.0000 (driver $0.0000, navigator $1.0000)", header
