from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, TEST_COMMAND, act, reflect, write_script
from conftest import git, make_git_repo
from openai_server import OpenAIServer, Reply

from llm_ide.config import Settings, load_config
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory


def config(**agent: object) -> Settings:
    model = {"max_retries": 2, "retry_base_delay": 0.01, "retry_max_delay": 0.02, "timeout": 2}
    return load_config("default", environment={"tools": []}, agent=agent, model=model)


def run(tmp_path: Path, responses: list[str], repo: Path | None = None, memory: dict | None = None, **agent: object):
    repo = repo or make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "script.yaml", responses)
    result = run_task(
        "Cart.total ignores quantities.",
        model=model,
        settings=config(**agent).merged({"memory": memory or {}}),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo,
    )
    return result, load_trajectory(result.trajectory_path)


def test_full_run_builds_the_tree_the_chain_the_lessons_and_the_patch(tmp_path: Path) -> None:
    # two calls per step (the seed's layout: reflect, then act), every prompt a fresh memory snapshot
    result, traj = run(tmp_path, FIX_SCRIPT, memory={"snapshot_every": 1}, single_call=False)
    ops = traj["operations"]
    assert result.exit_status == "submitted" == traj["info"]["exit_status"]
    assert [(o["id"], o["parent_id"], o["action_type"], o["bad_action"]) for o in ops] == [
        (0, None, "view", False),
        (1, 0, "bash", True),
        (2, 0, "edit", False),
        (3, 2, "bash", False),
        (4, 3, "submit", None),
    ]
    assert "Ran 1 test" in ops[3]["observation"] and "OK" in ops[3]["observation"]
    assert "FAILED" in ops[1]["observation"]
    assert result.submission == traj["info"]["submission"]
    assert "-            total += price\n+            total += price * quantity\n" in result.submission
    assert subprocess.run(TEST_COMMAND, shell=True, cwd=tmp_path / "repo").returncode == 0

    chunks = {(c["class_name"], c["function"]): c for c in traj["code_context"]}
    total = chunks[("Cart", "total")]
    assert total["activity"]["accessed"] == [1, 0, 1, 0, 0]
    assert total["activity"]["referred"] == [1, 1, 2, 1, 0]
    # scored when the context was last rendered, before the fifth operation: S = Σ (A_i + R_i)·0.9^(4−i)
    assert total["activity"]["score"] == pytest.approx((1 + 1) * 0.9**4 + 1 * 0.9**3 + (1 + 2) * 0.9**2 + 1 * 0.9 + 0)
    assert all(len(c["activity"]["accessed"]) == len(c["activity"]["referred"]) == 5 for c in traj["code_context"])

    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act"] + ["reflect", "act"] * 4
    assert traj["info"]["model_stats"]["api_calls"] == 9
    last_act = calls[-1]["prompt"]
    assert "### Operation 1" not in last_act  # the failed alternative left the reasoning chain...
    assert "- Rounding in Cart.total is fine; 11.5 means quantities are ignored." in last_act  # ...its lessons stay
    assert "- Run the tests before guessing." in last_act
    assert "### Operation 0" in last_act and "### Operation 3 (latest)" in last_act
    assert "            total += price * quantity" in last_act  # the code context shows the edited code
    alternative = calls[4]["prompt"]
    assert "## Alternative action" in alternative and "## Next step" not in alternative
    assert "## Next step" in calls[2]["prompt"]


def test_format_errors_are_asked_again_then_end_the_run(tmp_path: Path) -> None:
    responses = [
        "I think I should look at the code.",
        act("Look[1](shop/cart.py:11).", "view", path="shop/cart.py", start_line=1, end_line=5),
        "<bad_action>maybe</bad_action><summary>x</summary>",
        "no tags at all",
        '<thought>x</thought><action_type>dance</action_type><action_params>{"a": 1}</action_params>',
    ]
    result, traj = run(tmp_path, responses, max_format_errors=3, single_call=False)
    assert result.exit_status == "format_error"
    assert len(traj["operations"]) == 1
    prompts = [c["prompt"] for c in traj["model_calls"]]
    assert (
        "missing the action: a tag named after its type" in prompts[1]
        and "[assistant]\nI think I should look" in prompts[1]
    )
    assert "<bad_action> must be true or false, got 'maybe'" in prompts[3]
    assert "first line must be the verdict, `good` or `bad`" in prompts[4]
    assert len(prompts) == 5


@pytest.mark.parametrize(
    ("agent", "status", "n_ops", "error"),
    [
        ({"step_limit": 2}, "step_limit", 2, "the run's step limit (2) is reached"),
        ({"cost_limit": 0.0012}, "cost_limit", 1, "the run's cost limit $0.0012 is reached (spent $0.0260)"),
    ],
)
def test_limits_end_the_run_with_their_status_and_a_patch(
    tmp_path: Path, agent: dict, status: str, n_ops: int, error: str
) -> None:
    script = [
        act("Fix.", "edit", path="shop/cart.py", old="total += price\n", new="total += price * quantity\n"),
        reflect(False, "edited"),
        act("Check.", "bash", command=TEST_COMMAND),
        reflect(False, "ok"),
        act("Done.", "submit"),
    ]
    if status == "cost_limit":
        with OpenAIServer(replies=[Reply(text=script[0], input_tokens=10_000, output_tokens=100)]) as server:
            repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
            result = run_task(
                "fix",
                model="gpt-4o",
                base_url=server.url,
                settings=config(**agent),
                output_dir=tmp_path / "out",
                run_id="t1",
                repo=repo,
            )
            traj = load_trajectory(result.trajectory_path)
            assert traj["info"]["model_stats"]["cost"] == pytest.approx(10_000 * 2.5e-6 + 100 * 10e-6)
    else:
        result, traj = run(tmp_path, script, **agent)
    assert (result.exit_status, result.error, traj["info"].get("error", "")) == (status, error, error)
    assert len(traj["operations"]) == n_ops
    assert "+            total += price * quantity" in result.submission


def test_http_model_errors_end_the_run_cleanly(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=[act("Look.", "view", path="shop/cart.py"), 500]) as server:
        result = run_task(
            "fix",
            model="some-model",
            base_url=server.url,
            settings=config(),
            output_dir=tmp_path / "out",
            run_id="t1",
            repo=repo,
        )
    traj = load_trajectory(result.trajectory_path)
    assert result.exit_status == "model_error" == traj["info"]["exit_status"]
    assert "500" in result.error and "after 3 attempts" in result.error
    assert [o["action_type"] for o in traj["operations"]] == ["view"]
    assert server.hits == 4


def test_garbage_from_the_endpoint_ends_with_format_error(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=["☃ garbage ☃"]) as server:
        result = run_task(
            "fix",
            model="some-model",
            base_url=server.url,
            settings=config(max_format_errors=2),
            output_dir=tmp_path / "out",
            run_id="t1",
            repo=repo,
        )
    assert result.exit_status == "format_error"
    assert server.hits == 2
    assert "Your response could not be used" in server.requests[1].body["messages"][-1]["content"]


def test_a_reply_without_its_verdict_is_told_the_verdict_of_the_format_it_was_given(tmp_path: Path) -> None:
    """One call per step, a reply after the first without `good`/`bad`: it was told its first line must be
    `good: <summary>`, beside a format asking for `good` alone on it (a small model, SmolLM2, never got it right)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    unjudged = "The tests fail.\n<bash>python -m pytest -q</bash>"
    with OpenAIServer(replies=['Look.\n<view>{"path": "shop/cart.py"}</view>', unjudged]) as server:
        settings, out = config(max_format_errors=2), tmp_path / "out"
        result = run_task(
            "fix", model="m", base_url=server.url, settings=settings, output_dir=out, repo=repo, run_id="t"
        )
    assert result.exit_status == "format_error"
    told = server.requests[2].body["messages"][-1]["content"]
    assert "first line must be the verdict, `good` or `bad`" in told and "\ngood   (or `bad`)\n" in told
    assert "good: <summary>" not in told


@pytest.mark.parametrize("finish_reason", ["length", "stop"])
def test_a_reply_rejected_after_it_was_cut_at_the_length_limit_is_told_so(tmp_path: Path, finish_reason: str) -> None:
    """A reply cut at `model.max_tokens` before its action: the model was told only `missing the action`, and wrote
    as long a reply again (SmolLM2 at 256 tokens, three times in a row)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    rambling = Reply("I will look at the cart, then " * 20, output_tokens=256, finish_reason=finish_reason)
    with OpenAIServer(replies=[rambling]) as server:
        settings, out = config(max_format_errors=2), tmp_path / "out"
        result = run_task(
            "fix", model="m", base_url=server.url, settings=settings, output_dir=out, repo=repo, run_id="t"
        )
    assert result.exit_status == "format_error"
    told = server.requests[1].body["messages"][-1]["content"]
    assert told.startswith("Your response could not be used: missing the action")
    said = "it was cut at the length limit (256 tokens) before it ended: write a shorter reply"
    assert (said in told) == (finish_reason == "length")


def test_finished_run_is_not_redone_and_new_files_enter_the_patch(tmp_path: Path) -> None:
    script = [
        act("Add a helper.", "create", path="shop/util.py", content="def double(x):\n    return 2 * x\n"),
        reflect(False, "created"),
        act("Log noise.", "bash", command="echo noise > debug.log && mkdir -p build && echo x > build/out.txt"),
        reflect(False, "ok"),
        act("Done.", "submit"),
    ]
    result, traj = run(tmp_path, script)
    assert result.exit_status == "submitted"
    assert "+++ b/shop/util.py" in result.submission
    assert "debug.log" not in result.submission and "build/out.txt" not in result.submission
    assert git(tmp_path / "repo", "status", "--porcelain").splitlines() == ["?? build/", "?? shop/util.py"]
    unused = write_script(tmp_path / "unused.yaml", ["a reply a redone run would fail on"])  # passes the preflight
    again = run_task(
        "Cart.total ignores quantities.",
        model=unused,
        settings=config(),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=tmp_path / "repo",
    )
    assert (again.exit_status, again.submission) == ("submitted", result.submission)


def test_operation_history_stays_bounded_on_a_long_chain(tmp_path: Path) -> None:
    script = []
    for step in range(10):
        script += [
            act(f"Look again, step {step}[1](shop/cart.py:{step + 1}).", "bash", command=f"echo step-{step}"),
            reflect(False, f"printed step-{step}"),
        ]
    script.append(act("Done.", "submit"))
    settings = config().merged({"memory": {"history_max": 4, "snapshot_every": 1}})
    result = run_task(
        "print the steps",
        model=write_script(tmp_path / "script.yaml", script),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
    )
    traj = load_trajectory(result.trajectory_path)
    assert result.exit_status == "submitted"
    last = traj["model_calls"][-1]["prompt"]
    memory = last[last.index("## Operation History") :]
    # 9 nodes before the latest; at most 4 shown, the oldest counted 2 at a time
    assert "(6 earlier operations of the chain not shown.)" in memory
    assert [line for line in memory.splitlines() if line.startswith("### Operation")] == [
        "### Operation 6",
        "### Operation 7",
        "### Operation 8",
        "### Operation 9 (latest)",
    ]
    assert "Thought: Look again, step 6" in memory and "Look again, step 5" not in memory
    assert "Summary: printed step-8" in memory and "printed step-5" not in memory
    assert memory.count("Observation (return code 0)") == 1
    sizes = [c["prompt_chars"] for c in traj["model_calls"] if c["kind"] == "act"]
    assert max(sizes[6:]) - min(sizes[6:]) < 600  # once the window is full the prompt no longer grows


def test_single_call_builds_the_same_tree_with_one_call_per_step(tmp_path: Path) -> None:
    merged = [FIX_SCRIPT[0]] + [f"{FIX_SCRIPT[i]}\n{FIX_SCRIPT[i + 1]}" for i in range(1, len(FIX_SCRIPT), 2)]
    _, two = run(tmp_path / "two", FIX_SCRIPT, single_call=False)
    result, one = run(tmp_path / "one", merged, single_call=True)
    assert result.exit_status == "submitted"
    fields = ("id", "parent_id", "thought", "action_type", "bad_action", "summary", "lessons")
    assert [[o[f] for f in fields] for o in one["operations"]] == [[o[f] for f in fields] for o in two["operations"]]
    assert [c["kind"] for c in one["model_calls"]] == ["act"] * 5
    prompts = [c["prompt"] for c in one["model_calls"]]
    assert all(later.startswith(earlier) for earlier, later in zip(prompts, prompts[1:], strict=False))
    assert prompts[2].endswith("```\n## Judge operation 1, then act")
    assert "[assistant]\nbad: The test fails with 11.5 != 16.0" in prompts[3]  # the reflection stays in its reply
    assert "+            total += price * quantity" in result.submission
