from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, single_call
from conftest import make_git_repo
from openai_server import OpenAIServer, Reply

from llm_ide.budget import CostBudget
from llm_ide.config import load_config
from llm_ide.errors import BudgetSpent
from llm_ide.nodes.update_activity import run_limit
from llm_ide.run.single import run_task
from llm_ide.state.graph_state import empty_usage


def test_cached_tokens_and_cost_reach_model_stats_and_every_recorded_call(tmp_path: Path) -> None:
    """The endpoint reports cached prompt tokens; the run prices them at gpt-5-mini's cache-read price."""
    script = single_call(FIX_SCRIPT)  # one call per step
    tokens = [(4000 + 500 * i, 3000 + 450 * i if i else 0, 40 + i) for i in range(len(script))]
    replies = [
        Reply(text, input_tokens=i, cached_tokens=c, output_tokens=o)
        for text, (i, c, o) in zip(script, tokens, strict=True)
    ]
    costs = [((i - c) * 0.25 + c * 0.025 + o * 2.0) / 1e6 for i, c, o in tokens]
    settings = load_config("default", environment={"tools": []})
    with OpenAIServer(replies=replies) as server:
        result = run_task(
            "Cart.total ignores quantities.",
            model="gpt-5-mini",
            base_url=server.url,
            settings=settings,
            output_dir=tmp_path / "out",
            run_id="t1",
            repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
        )
    assert result.exit_status == "submitted"
    traj = json.loads(result.trajectory_path.read_text())
    stats = traj["info"]["model_stats"]
    assert stats == result.model_stats
    assert (stats["api_calls"], stats["input_tokens"], stats["output_tokens"]) == (
        len(script),
        sum(i for i, _, _ in tokens),
        sum(o for _, _, o in tokens),
    )
    assert (stats["cache_read_tokens"], stats["cache_write_tokens"]) == (sum(c for _, c, _ in tokens), 0)
    assert stats["cost"] == pytest.approx(sum(costs))
    calls = traj["model_calls"]
    assert [(c["prompt_tokens"], c["cache_read_tokens"], c["response_tokens"]) for c in calls] == tokens
    assert [c["cost"] for c in calls] == pytest.approx(costs)


@pytest.mark.parametrize(
    ("limit", "spent", "said"),
    [
        (0.0012, 0.0019, "the shared cost limit $0.0012 is reached (spent $0.0019)"),
        (0.00004, 0.00005, "the shared cost limit $0.000040 is reached (spent $0.000050)"),
        (3.0, 3.25, "the shared cost limit $3.0000 is reached (spent $3.2500)"),
    ],
)
def test_a_sub_cent_cost_limit_is_said_with_its_digits(limit: float, spent: float, said: str) -> None:
    """A limit below a cent was said as `$0.00` (two decimals), a cost below $0.0001 as `$0.0000`."""
    with pytest.raises(BudgetSpent) as spent_all:
        CostBudget(limit, spent).admit()
    assert str(spent_all.value) == said


@pytest.mark.parametrize(
    ("limits", "said"),
    [
        (
            {"cost_limit": 1.5},
            "the run's cost limit $1.5000 is reached (spent $1.7500: the driver $0.7500, the navigator $1.0000)",
        ),
        ({"cost_limit": 2.0}, None),
        (
            {"token_limit": 1_000},
            "the run's token limit (1,000) is reached (1,200 tokens: the driver 200, the navigator 1,000)",
        ),
        ({"token_limit": 1_500}, None),
    ],
)
def test_the_runs_limits_count_a_variants_own_calls_with_the_drivers(
    limits: dict[str, float], said: str | None
) -> None:
    """A run a navigator's calls stopped at its limit (its usage kept apart in its own record) stays stopped under the
    same limit when run again: the limit counts both, the cost and the tokens alike (not the driver's alone), and
    says each one's part as the navigator's own check does (it said the sum only)."""
    agent = load_config("default").agent.model_copy(update=limits)
    driver = {**empty_usage(), "input_tokens": 150, "output_tokens": 50, "cost": 0.75}
    state = {
        "usage": driver,
        "navigator": {"usage": {**empty_usage(), "input_tokens": 900, "output_tokens": 100, "cost": 1.0}},
    }
    ended = run_limit(agent, state, steps=1, elapsed=0.0, spent=False)
    assert (str(ended) if ended else None) == said
