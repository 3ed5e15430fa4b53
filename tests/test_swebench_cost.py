"""What a batch spends, against a real OpenAI-compatible server on loopback (most calls priced at $1): the batch's
cost limit (reached, raised, held by calls at the same moment), what an interrupted instance and a call cut by
Ctrl-C spent, an instance's cost in the batch's log and across its attempts."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import BUGGY_FILES
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer
from swebench_fixtures import (
    assert_four_dollars,
    build_dataset,
    dollar_calls,
    dollar_steps,
    priced_options,
    write_config,
)

from llm_ide.budget import CostBudget
from llm_ide.config import load_config
from llm_ide.errors import usd
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.choice import batch_config
from llm_ide.swebench.dataset import load_dataset
from llm_ide.swebench.instances import run_instance
from llm_ide.swebench.store import OutputStore, read_preds, read_statuses
from llm_ide.variant import AgentContext, ModelCall, ModelRequest, ModelResponse, Variant


def statuses(output: Path) -> dict[str, str]:
    return {instance_id: info["exit_status"] for instance_id, info in read_statuses(output).items()}


def test_global_cost_limit_stops_the_batch(tmp_path: Path) -> None:
    """A real OpenAI-compatible server on loopback; every call costs $1 (1M input tokens at $1/M)."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_calls(tmp_path, 3)
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=4.0)
        summary = run_swebench(str(dataset), "test", options)
    assert {k: (v.exit_status, v.cost, v.error) for k, v in summary.outcomes.items()} == {
        "demo__calc-1": ("submitted", 3.0, ""),
        "demo__text-1": ("cost_limit", 1.0, "the shared cost limit is reached"),  # not its own $3
    }
    assert summary.not_started == ["demo__shapes-1"]
    assert sorted(read_preds(options.output)) == ["demo__calc-1", "demo__text-1"]
    assert statuses(options.output) == {  # demo__shapes-1 was missing
        "demo__calc-1": "submitted",
        "demo__text-1": "cost_limit",
        "demo__shapes-1": "not_started",
    }
    assert (summary.cost, summary.spent_before) == (4.0, 0.0)

    text_went_on = {"demo__text-1": ("cost_limit", 3.0, "the run's cost limit $3.0000 is reached (spent $3.0000)")}
    for limit, hits, outcomes in [(4.0, 0, {}), (6.0, 2, text_went_on)]:  # (stopped by the batch's: it goes on)
        with OpenAIServer(replies=calls) as server:  # the same command again, then with $2 more: what is left
            again = run_swebench(str(dataset), "test", replace(options, base_url=server.url, cost_limit=limit))
        skipped = sorted(set(summary.outcomes) - set(outcomes))
        assert server.hits == hits and again.spent_before == 4.0 and again.skipped_existing == skipped
        assert {k: (v.exit_status, v.cost, v.error) for k, v in again.outcomes.items()} == outcomes
        assert again.not_started == ["demo__shapes-1"]
    assert OutputStore(options.output).spent() == 6.0 and statuses(options.output)["demo__shapes-1"] == "not_started"


def test_an_instance_whose_first_call_the_batchs_limit_refused_runs_when_the_limit_is_raised(tmp_path: Path) -> None:
    """Started while the budget had room, refused at its first call (the other workers spent the rest meanwhile): no
    prediction, so a rerun with a higher --cost-limit runs it (it was kept as an empty patch, skipped forever)."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 1)
    (instance,) = load_dataset(str(dataset)).instances
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        spent = CostBudget(2.0, 2.0)  # what the others spent
        refused = run_instance(instance, options, batch_config(options), OutputStore(options.output), budget=spent)
        assert (refused.exit_status, refused.cost, refused.steps, server.hits) == ("cost_limit", 0.0, 0, 0)
        assert read_preds(options.output) == {}

        again = run_swebench(str(dataset), "test", replace(options, cost_limit=5.0))
    assert again.skipped_existing == [] and server.hits == 3
    assert {k: (v.exit_status, v.cost) for k, v in again.outcomes.items()} == {instance.instance_id: ("submitted", 3.0)}
    assert list(read_preds(options.output)) == [instance.instance_id]


def test_an_interrupted_instance_records_what_it_spent_and_the_batchs_limit_counts_it(tmp_path: Path) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 1)
    (instance,) = load_dataset(str(dataset)).instances
    stop = threading.Event()
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        ended = run_instance(  # Ctrl-C in the batch as its first step is told: the run ends at its next event
            instance, options, batch_config(options), OutputStore(options.output),
            on_event=lambda _, event: stop.set() if event.kind == "step" else None, stop=stop,
        )  # fmt: skip
        assert (ended.exit_status, ended.cost, ended.steps, server.hits) == ("interrupted", 1.0, 1, 1)
        statuses = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())["instances"]
        assert statuses == {instance.instance_id: {"exit_status": "interrupted", "steps": 1, "cost": 1.0}}

        resumed = run_swebench(str(dataset), "test", replace(options, cost_limit=2.0))
    assert resumed.spent_before == 1.0 and server.hits == 2  # $1 left: the resumed run's one more call
    assert {k: (v.exit_status, v.cost) for k, v in resumed.outcomes.items()} == {
        instance.instance_id: ("cost_limit", 2.0)
    }


class CtrlCAfterTheFirstCall(Variant):
    """Ctrl-C as the step's reply has come (paid, logged) and its update is not saved yet."""

    name = "ctrl_c_after_the_first_call"

    def __init__(self) -> None:
        self.calls = 0

    def wrap_model_call(self, ctx: AgentContext, request: ModelRequest, call: ModelCall) -> ModelResponse:
        response = call(request)
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return response


def test_a_call_paid_at_a_step_cut_by_ctrl_c_stays_in_the_runs_cost_after_the_resume(tmp_path: Path) -> None:
    """The step's reply was paid for; the resumed run asks for that step again (the same call index): both are spent,
    the first one counted as a discarded call beside the run's history, in the trajectory, the result and the batch's
    spending."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    calls, config = dollar_steps(tmp_path, 3)
    settings = load_config(overrides=[config], agent={"step_limit": 2})
    run = {"model": "gpt-test", "settings": settings, "output_dir": tmp_path / "out", "run_id": "r", "repo": repo}
    with OpenAIServer(replies=calls) as server:
        with pytest.raises(KeyboardInterrupt):
            run_task("Go on.", base_url=server.url, variants=[CtrlCAfterTheFirstCall()], **run)
        cut = load_trajectory(tmp_path / "out" / "r.traj.json")["info"]
        assert (cut["exit_status"], server.hits) == ("interrupted", 1)
        assert {k: cut["model_stats"][k] for k in SPENT} == {"api_calls": 0, "discarded_calls": 1, "cost": 1.0}
        assert cut["model_stats"]["input_tokens"] == 1_000_000

        resumed = run_task("Go on.", base_url=server.url, **run)
    assert (resumed.exit_status, server.hits) == ("step_limit", 3)
    assert {k: resumed.model_stats[k] for k in SPENT} == {"api_calls": 2, "discarded_calls": 1, "cost": 3.0}
    info = load_trajectory(resumed.trajectory_path)["info"]
    assert info["model_stats"] == resumed.model_stats and info["model_stats"]["input_tokens"] == 3_000_000
    assert [call["index"] for call in load_trajectory(resumed.trajectory_path)["model_calls"]] == [0, 1]


SPENT = ("api_calls", "discarded_calls", "cost")


def test_global_cost_limit_holds_for_runs_calling_at_the_same_moment(tmp_path: Path) -> None:
    """Three workers whose first calls the server answers only once all three have arrived: each call is admitted
    against the budget before it starts, so $4 buys four $1 calls whatever the order, never more."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_steps(tmp_path, 12)
    with OpenAIServer(replies=calls, together=3) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=4.0, workers=3)
        summary = run_swebench(str(dataset), "test", options)
    assert_four_dollars(server, summary)


@pytest.mark.parametrize("prices", [{}, {"gpt-test": {"input": 0.01, "output": 0.0}}], ids=["unpriced", "cheap"])
def test_the_batch_log_says_an_instances_cost_as_the_console_does(tmp_path: Path, prices: dict[str, Any]) -> None:
    """swebench.log said `cost 0.0000` for a model without a price (its cost unknown, not nothing) and rounded a cost
    under $0.0001 to nothing; everywhere else it is `unpriced`, or dollars as errors.usd shows them."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    config = write_config(tmp_path / "c.yaml", max_format_errors=1)
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "model": {"prices": prices}}))
    with OpenAIServer(replies=["no action in this reply"]) as server:
        options = BatchOptions(
            model="gpt-test", output=tmp_path / "out", environment="local", config_files=[config], base_url=server.url
        )
        run_swebench(str(dataset), "test", options)
    cost = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())["instances"][rows[0]["instance_id"]]
    assert (0 < cost["cost"] < 1e-4) if prices else cost["cost"] == 0
    said = f"cost {usd(cost['cost'])}" if prices else "cost unpriced"
    line = next(line for line in (options.output / "swebench.log").read_text().splitlines() if "patch lines" in line)
    assert f"({said}, 0 patch lines)" in line and said != "cost $0.0000", line


def test_an_instances_live_cost_and_steps_count_each_of_its_attempts(tmp_path: Path) -> None:
    """Two attempts of one instance, $3 and 3 steps each: the events the batch's live line reads said each attempt's
    own cost ($3, then from $0 again), so the line, which adds a run's rises, stayed at $3 until the instance ended at
    $6; its steps (the batch's line, exit_statuses.yaml of one interrupted) were the largest attempt's, 3, where
    `llm-ide report` counts every attempt's, 6, as the cost counts every attempt's dollars."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 2)
    data = yaml.safe_load(config.read_text())
    (tmp_path / "review.yaml").write_text(yaml.safe_dump({"responses": ["<score>3</score><reasons>Hm.</reasons>"] * 2}))
    reviewer = {"model": f"scripted:{tmp_path / 'review.yaml'}"}
    data["attempts"] = {"max": 2, "choose": "best_score", "reviewer": reviewer}
    config.write_text(yaml.safe_dump(data))
    (instance,) = load_dataset(str(dataset)).instances
    told: list[float] = []
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        tell = lambda _, event: told.append(event.cost) if event.kind in ("step", "end") else None  # noqa: E731
        ended = run_instance(instance, options, batch_config(options), OutputStore(options.output), on_event=tell)
    assert (ended.exit_status, ended.cost, ended.steps, server.hits) == ("submitted", 6.0, 6, 6)
    assert told == sorted(told) and told[-1] == 6.0, told
    report = invoke("report", str(options.output))
    assert report.stdout.splitlines()[-1] == "1 of 1 instance shown; their total 6 steps, $6.0000", report.stdout
