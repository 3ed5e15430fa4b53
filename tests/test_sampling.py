"""Action sampling at `act` (k candidates, deduplicated, one chosen, only it runs) and demonstrations in the prompt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, TEST_COMMAND, act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer, Reply

from llm_ide.config import Settings, load_config
from llm_ide.errors import ConfigError
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.sampling.demonstrations import render_demonstrations

TASK = "Cart.total ignores quantities."
VIEW = act("Read the total[1](shop/cart.py:11).", "view", path="shop/cart.py", start_line=1, end_line=15)
VIEW_AGAIN = act("The total is in cart.py; read it.", "view", path="shop/cart.py", start_line=1, end_line=15)
RUN_TESTS = act("Run the tests first to see the failure.", "bash", command=TEST_COMMAND)
SEARCH = act("Find where quantities are used.", "search", pattern="quantity", path="shop")
SUBMIT = act("Done.", "submit")


def settings(**sampling: object) -> Settings:
    """Two calls per step: the scripts hold the k samples of each act call and the reflect call's reply apart."""
    model = {"max_retries": 1, "retry_base_delay": 0.01, "retry_max_delay": 0.02, "timeout": 5}
    return load_config(
        "default", environment={"tools": []}, model=model, sampling=sampling, agent={"single_call": False}
    )


def run(tmp_path: Path, model: str, config: Settings, base_url: str | None = None, run_id: str = "t1"):
    repo = tmp_path / "repo"
    if not repo.exists():
        make_git_repo(repo, BUGGY_FILES)
    result = run_task(
        TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id=run_id, repo=repo, base_url=base_url
    )
    return result, load_trajectory(result.trajectory_path)


def test_k3_the_discriminators_pick_runs_and_every_candidate_is_recorded(tmp_path: Path) -> None:
    script = [
        VIEW,  # step 0: three samples, two of them the same view (folded into one candidate)...
        RUN_TESTS,
        VIEW_AGAIN,
        "The view was proposed twice, but running the tests shows the failure first.\n<choice>2</choice>",  # ...#2 runs
        reflect(False, "The test fails: 11.5 != 16.0."),
        SUBMIT,  # step 1: three identical samples, nothing to choose
        SUBMIT,
        SUBMIT,
    ]
    result, traj = run(tmp_path, write_script(tmp_path / "script.yaml", script), settings(k=3))
    ops = traj["operations"]
    assert result.exit_status == "submitted"
    assert [op["action_type"] for op in ops] == ["bash", "submit"]  # the pick ran, not the majority's view
    assert "FAILED" in ops[0]["observation"]
    assert ops[0]["candidates"] == [
        {
            "thought": "Read the total[1](shop/cart.py:11).",
            "action_type": "view",
            "action_params": {"path": "shop/cart.py", "start_line": 1, "end_line": 15},
            "samples": 2,
            "chosen": False,
        },
        {
            "thought": "Run the tests first to see the failure.",
            "action_type": "bash",
            "action_params": {"command": TEST_COMMAND},
            "samples": 1,
            "chosen": True,
        },
    ]
    choice = ops[0]["choice"]
    assert (choice["method"], choice["calls"], choice["samples"], choice["fallback"]) == ("ask_colleagues", 1, 3, False)
    assert "shows the failure first" in choice["reason"]
    assert ops[1]["choice"] == {"method": "unanimous", "calls": 0, "samples": 3, "unusable": 0}
    assert [c["chosen"] for c in ops[1]["candidates"]] == [True] and ops[1]["candidates"][0]["samples"] == 3

    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act"] * 3 + ["ask_colleagues", "reflect"] + ["act"] * 3
    assert traj["info"]["model_stats"]["api_calls"] == 8
    assert sum(c["prompt_tokens"] for c in calls) == traj["info"]["model_stats"]["input_tokens"]
    discriminator = calls[3]["prompt"]
    assert discriminator.startswith(calls[0]["prompt"])  # the act conversation, then the question: a cached prefix
    assert "### Candidate 1 (proposed 2 times)" in discriminator and "### Candidate 2\n" in discriminator
    assert "### Candidate 3" not in discriminator


def test_pairwise_on_its_own_model_compares_the_best_so_far_with_the_next(tmp_path: Path) -> None:
    agent = [VIEW, RUN_TESTS, SEARCH, reflect(False, "The code is read."), RUN_TESTS, SEARCH, SUBMIT]
    judge = [
        "The tests show more.\n<choice>2</choice>",  # step 0: view vs bash → bash
        "Still the tests.\n<choice>1</choice>",  # bash vs search → bash
        "I cannot decide.",  # step 1: bash vs search, unusable → bash kept
        "Submit.\n<choice>2</choice>",  # bash vs submit → submit
    ]
    config = settings(k=3, choice="pairwise", model=write_script(tmp_path / "judge.yaml", judge))
    result, traj = run(tmp_path, write_script(tmp_path / "agent.yaml", agent), config)
    ops = traj["operations"]
    assert [op["action_type"] for op in ops] == ["bash", "submit"]
    assert [r["winner"] for r in ops[0]["choice"]["rounds"]] == [2, 2]
    assert [r["pair"] for r in ops[1]["choice"]["rounds"]] == [[1, 2], [1, 3]]
    assert ops[1]["choice"]["fallback"] is True and ops[0]["choice"]["fallback"] is False
    assert [c["chosen"] for c in ops[1]["candidates"]] == [False, False, True]
    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act"] * 3 + ["pairwise"] * 2 + ["reflect"] + ["act"] * 3 + ["pairwise"] * 2
    judged = [c for c in calls if c["kind"] == "pairwise"]
    assert {c.get("model") for c in judged} == {f"scripted:{tmp_path / 'judge.yaml'}"}
    assert all(c.get("model") is None for c in calls if c["kind"] != "pairwise")
    assert result.exit_status == "submitted"


def test_the_providers_n_brings_the_k_candidates_in_one_request(tmp_path: Path) -> None:
    replies = [
        Reply(choices=(VIEW, RUN_TESTS, VIEW_AGAIN), input_tokens=4000, output_tokens=300),
        Reply(text="<choice>1</choice>", input_tokens=4200, output_tokens=10),
        Reply(text=reflect(False, "Read."), input_tokens=5000, output_tokens=20),
        Reply(choices=(SUBMIT, SUBMIT, SUBMIT), input_tokens=5100, output_tokens=30),
    ]
    with OpenAIServer(replies=replies) as server:
        result, traj = run(tmp_path, "gpt-5-mini", settings(k=3), base_url=server.url)
        bodies = [request.body for request in server.requests]
    assert [body.get("n") for body in bodies] == [3, None, None, 3]
    ops = traj["operations"]
    assert [op["action_type"] for op in ops] == ["view", "submit"] and result.exit_status == "submitted"
    assert [c["samples"] for c in ops[0]["candidates"]] == [2, 1]
    stats = traj["info"]["model_stats"]
    assert stats["api_calls"] == 4 and stats["input_tokens"] == 4000 + 4200 + 5000 + 5100
    assert stats["cost"] == pytest.approx((18_300 * 0.25 + 360 * 2.0) / 1e6)  # gpt-5-mini's price, prompts paid once
    assert "[choice 2 of 3]" in traj["model_calls"][0]["response"]


def test_a_run_with_k_1_makes_one_act_call_per_step_and_records_no_candidates(tmp_path: Path) -> None:
    result, traj = run(tmp_path, write_script(tmp_path / "script.yaml", FIX_SCRIPT), settings(k=1))
    assert result.exit_status == "submitted"
    assert [c["kind"] for c in traj["model_calls"]] == ["act"] + ["reflect", "act"] * 4
    assert all("candidates" not in op and "choice" not in op for op in traj["operations"])


def test_unusable_samples_are_dropped_and_all_unusable_is_a_format_error_asked_again(tmp_path: Path) -> None:
    script = ["no tags", "none either", "nothing"]  # step 0: no usable sample: the format error is told...
    script += [RUN_TESTS, "garbage", VIEW, "<choice>1</choice>"]  # ...and the step sampled again
    script += [reflect(False, "The test fails."), SUBMIT, SUBMIT, SUBMIT]
    result, traj = run(tmp_path, write_script(tmp_path / "script.yaml", script), settings(k=3))
    ops = traj["operations"]
    assert result.exit_status == "submitted"
    assert [op["action_type"] for op in ops] == ["bash", "submit"]
    assert ops[0]["choice"]["unusable"] == 1 and [c["action_type"] for c in ops[0]["candidates"]] == ["bash", "view"]
    calls = traj["model_calls"]
    assert [c["kind"] for c in calls] == ["act"] * 6 + ["ask_colleagues", "reflect"] + ["act"] * 3
    assert "Your response could not be used: missing the action" in calls[3]["prompt"]
    assert "Your response could not be used" not in calls[2]["prompt"]


def test_demonstrations_from_a_scripted_run_lead_the_system_prompt_before_the_task(tmp_path: Path) -> None:
    first, _ = run(tmp_path / "a", write_script(tmp_path / "fix.yaml", FIX_SCRIPT), settings())
    config = settings().merged({"demonstrations": [str(first.trajectory_path)]})
    result, traj = run(tmp_path / "b", write_script(tmp_path / "script.yaml", [SUBMIT]), config)
    assert result.exit_status == "submitted"
    prompt = traj["model_calls"][0]["prompt"]
    system = prompt.split("\n\n[user]\n")[0]
    demos = system[system.index("## Demonstrations") : system.index("## Task Description")]
    assert "### Demonstration 1\nTask:\nCart.total ignores quantities." in demos
    assert '<edit>{"path": "shop/cart.py", "old": "            total += price\\n"' in demos
    assert "Operation 0: Read the cart's total[1](shop/cart.py:11)." in demos
    assert "Hypothesis: rounding" not in demos  # the failed alternative is not part of the worked example
    assert "- Run the tests before guessing." in demos  # but its lesson is
    assert "+            total += price * quantity" in demos  # and the patch it led to
    assert system.index("## Demonstrations") < system.index("## Task Description") < system.index("## Tool Usage")

    capped = render_demonstrations(config.merged({"sampling": {"demonstration_max_chars": 800}}), config.templates)
    assert "characters elided" in capped and len(capped) < 800 + 400  # the ceiling, plus the section's own text
    assert capped.count("### Demonstration 1") == 1 and "+            total += price * quantity" in capped  # the tail

    plain = run(tmp_path / "c", write_script(tmp_path / "plain.yaml", [SUBMIT]), settings())[1]
    plain_system = plain["model_calls"][0]["prompt"].split("\n\n[user]\n")[0].removeprefix("[system]\n")
    assert (
        system == f"[system]\n{render_demonstrations(config, config.templates)}\n\n{plain_system}"
    )  # ahead of the agent's own, unchanged


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sampling": {"k": 0}}, "sampling.k: input should be greater than 0"),
        ({"sampling": {"k": 17}}, "sampling.k: input should be less than or equal to 16"),
        ({"sampling": {"choice": "vote"}}, "sampling.choice: input should be 'ask_colleagues' or 'pairwise'"),
        ({"sampling": {"n": "always"}}, "sampling.n: input should be 'auto' or 'never'"),
        ({"sampling": {"templates": {"pairwise": 3}}}, "sampling.templates.pairwise: input should be a valid string"),
        ({"sampling": {"judge": "x"}}, "sampling.judge: unknown setting"),
        ({"demonstrations": ["missing.traj.json"]}, "demonstrations: value error, no trajectory file missing"),
        ({"demonstrations": ["NOT_A_TRAJECTORY"]}, "not an llm-ide trajectory (format llm-ide-1)"),
    ],
)
def test_bad_sampling_and_demonstration_settings_are_one_line_errors(
    tmp_path: Path, values: dict, message: str
) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": []}))
    override = tmp_path / "override.yaml"
    text = json.dumps(values).replace("NOT_A_TRAJECTORY", str(other))
    override.write_text(text)  # JSON is YAML
    with pytest.raises(ConfigError) as error:
        load_config("default", [override])
    assert message in str(error.value)
    assert str(error.value).startswith(f"{override}: ") and "\n" not in str(error.value)


def test_a_kill_after_the_choice_resumes_the_step_and_runs_the_pick_once(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n"})
    one = act("First.", "bash", command="echo one >> trail.txt")
    two = act("Second.", "bash", command="echo two >> trail.txt")
    other = act("Something else.", "bash", command="echo never >> trail.txt")
    script = [one, one, one, reflect(False, "wrote one"), other, two, two, "<choice>2</choice>"]
    script += [reflect(False, "wrote two"), *[act("Done.", "submit")] * 3]
    model = write_script(tmp_path / "script.yaml", script)
    (tmp_path / "config.yaml").write_text(
        json.dumps({"environment": {"tools": []}, "sampling": {"k": 3}, "agent": {"single_call": False}})
    )
    args = ["run", "--repo", str(repo), "--task", "write the trail", "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(tmp_path / "config.yaml")]
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    env = {**os.environ, "LLM_IDE_FAILPOINTS": "sampling.chosen=2"}  # in step 1, after its choice
    killed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert (repo / "trail.txt").read_text() == "one\n"

    resumed = invoke(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    traj = load_trajectory(tmp_path / "out" / "T.traj.json")
    assert traj["info"]["exit_status"] == "submitted"
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"  # the pick ran once, the other candidate never
    assert [op["choice"]["method"] for op in traj["operations"]] == ["unanimous", "ask_colleagues", "unanimous"]
    assert [(c["action_params"]["command"], c["chosen"]) for c in traj["operations"][1]["candidates"]] == [
        ("echo never >> trail.txt", False),
        ("echo two >> trail.txt", True),
    ]
    assert [c["index"] for c in traj["model_calls"]] == list(range(len(script)))


def test_the_k_requests_are_in_flight_together(tmp_path: Path) -> None:
    """Without `n` the k samples are asked at the same time: the endpoint answers the first three requests only once
    all three have arrived (one after the other, they would time out and fail)."""
    replies = [VIEW, VIEW_AGAIN, VIEW, reflect(False, "Read."), SUBMIT, SUBMIT, SUBMIT]
    with OpenAIServer(replies=replies, together=3, hang_seconds=30) as server:
        result, traj = run(tmp_path, "gpt-5-mini", settings(k=3, n="never"), base_url=server.url)
        bodies = [request.body for request in server.requests]
    assert result.exit_status == "submitted", result.error
    assert [body.get("n") for body in bodies] == [None] * 7
    ops = traj["operations"]
    assert [op["action_type"] for op in ops] == ["view", "submit"] and ops[0]["candidates"][0]["samples"] == 3
    calls = traj["model_calls"]
    assert [call["index"] for call in calls] == list(range(7))
    assert traj["info"]["model_stats"]["cost"] == pytest.approx(sum(call["cost"] for call in calls))  # each sample paid
    assert all(call["cost"] > 0 for call in calls)


def test_single_call_takes_the_reflection_of_the_candidate_that_runs(tmp_path: Path) -> None:
    """`agent.single_call`: each sample holds a reflection on the previous operation and the next action; the chosen
    candidate's reflection decides where the new node hangs (a `bad` verdict: a sibling of the failed operation)."""
    good = "good: The file is read.\n" + RUN_TESTS
    bad = "bad: The wrong part of the file.\nlesson: Search before viewing.\n" + SEARCH
    script = [VIEW, VIEW, VIEW, good, bad, good, "<choice>2</choice>", *["good: Found it.\n" + SUBMIT] * 3]
    config = settings(k=3).merged({"agent": {"single_call": True}})
    result, traj = run(tmp_path, write_script(tmp_path / "script.yaml", script), config)
    ops = traj["operations"]
    assert result.exit_status == "submitted"
    assert [(op["id"], op["parent_id"], op["action_type"], op["bad_action"]) for op in ops] == [
        (0, None, "view", True),
        (1, None, "search", False),  # the pick's `bad` verdict: the search replaces the view
        (2, 1, "submit", None),
    ]
    assert ops[0]["lessons"] == "Search before viewing."
    assert [(c["action_type"], c["samples"], c["chosen"]) for c in ops[1]["candidates"]] == [
        ("bash", 2, False),
        ("search", 1, True),
    ]


def test_the_cli_tells_a_bad_sampling_setting_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("sampling:\n  k: 3\n  choice: majority\n")
    args = ["run", "--repo", str(tmp_path), "--task", "t", "--model", "scripted:x.yaml", "--config", "bad.yaml"]
    result = invoke(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: bad.yaml: sampling.choice: input should be 'ask_colleagues' or 'pairwise' (got 'majority')"
    ]


def test_attempts_sample_too_and_the_combined_trajectory_keeps_each_attempts_candidates(tmp_path: Path) -> None:
    """Attempts (issue 11 items 1-3) run the sampled graph when `sampling.k > 1`: in attempt 1 the discriminator
    picks the wrong fix, in attempt 2 the right one; the reviewer accepts attempt 2."""
    from attempts_scripts import FILES, RIGHT, TASK, WRONG, review, scripts

    from llm_ide import run_attempts

    check = act("Run the check.", "bash", command="python3 test_calc.py")
    right, wrong = act("Drop the + 1.", "bash", command=RIGHT), act("Note it.", "bash", command=WRONG)
    done = act("Done.", "submit")

    def attempt(pick: int) -> list[str]:
        fix = [right, wrong, right, f"<choice>{pick}</choice>"]  # two distinct candidates: the discriminator picks
        return [*[check] * 3, reflect(False, "double(2) is 5."), *fix, reflect(False, "Applied."), *[done] * 3]

    tries = [attempt(2), attempt(1), attempt(1)]  # the third is never run
    model = scripts(tmp_path / "scripts", tries, [review(2, "README only."), review(9, "Fixed.")])
    config = settings(k=3).merged({"attempts": {"max": 3}})
    repo = make_git_repo(tmp_path / "repo", FILES)
    result = run_attempts(TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id="T", repo=repo)
    assert [a["index"] for a in result.attempts] == [1, 2] and result.chosen == 2
    assert "-    return x + x + 1  # BUG\n+    return x + x" in result.submission
    ops = json.loads(result.trajectory_path.read_text())["operations"]
    chosen = [op for op in ops if op["choice"].get("method") == "ask_colleagues"]
    picked = {op["attempt"]: op["action_params"]["command"] for op in chosen}
    assert picked == {1: WRONG, 2: RIGHT}
    assert all(op["candidates"] for op in ops)

    demos = render_demonstrations(config.merged({"demonstrations": [str(result.trajectory_path)]}), config.templates)
    assert RIGHT in demos and "issue tracker" not in demos  # a run with attempts demonstrates its chosen attempt


def test_an_endpoint_refusing_n_gets_k_requests_from_then_on(tmp_path: Path) -> None:
    replies = [400, VIEW, VIEW, VIEW, reflect(False, "Read."), SUBMIT, SUBMIT, SUBMIT]
    with OpenAIServer(replies=replies) as server:
        result, traj = run(tmp_path, "gpt-5-mini", settings(k=3), base_url=server.url)
        bodies = [request.body for request in server.requests]
    assert result.exit_status == "submitted", result.error
    assert [body.get("n") for body in bodies] == [3] + [None] * 7  # refused once, never asked again
    assert [op["action_type"] for op in traj["operations"]] == ["view", "submit"]
    assert traj["info"]["model_stats"]["api_calls"] == 7  # the refused request is no call


def test_the_navigator_gates_only_the_chosen_candidate_and_a_denial_is_sampled_again(tmp_path: Path) -> None:
    """Sampling with the navigator (issue 12): the permission node sees the action that was chosen; denied, it
    stays a failed operation with its candidates, and the alternative is sampled again."""
    cheat = act("Make the test expect 11.5.", "edit", path="tests/test_cart.py", old="16.0", new="11.5")
    fix = act("Multiply by the quantity.", "edit", path="shop/cart.py", old="            total += price\n",
              new="            total += price * quantity\n")  # fmt: skip
    driver = [*[VIEW] * 3, reflect(False, "total sums price only."), cheat, fix, cheat, "<choice>1</choice>"]
    driver += [*[fix] * 3, reflect(False, "fixed"), *[RUN_TESTS] * 3, reflect(False, "tests pass"), *[SUBMIT] * 3]
    navigator = [
        '<view>{"path": "shop/cart.py"}</view>',
        "<plan>1. Multiply price by quantity in Cart.total.\n2. Run the tests.</plan>",
        "<deny>Changing the test hides the bug.</deny>",
        "<approve>As planned.</approve>",
        "<approve>Running the tests is fine.</approve>",
    ]
    nav = {"mode": "model", "model": write_script(tmp_path / "navigator.yaml", navigator)}
    config = settings(k=3).merged({"navigator": nav})
    result, traj = run(tmp_path, write_script(tmp_path / "driver.yaml", driver), config)
    assert result.exit_status == "submitted"
    ops = traj["operations"]
    assert [(op["id"], op["parent_id"], op["action_type"], op["bad_action"]) for op in ops] == [
        (0, None, "view", False),
        (1, 0, "edit", True),  # the pick, denied: never run
        (2, 0, "edit", False),  # its alternative, sampled again (three identical samples)
        (3, 2, "bash", False),
        (4, 3, "submit", None),
    ]
    assert ops[1]["denied"]["reason"] == "Changing the test hides the bug."
    assert [(c["action_params"]["path"], c["samples"], c["chosen"]) for c in ops[1]["candidates"]] == [
        ("tests/test_cart.py", 2, True),
        ("shop/cart.py", 1, False),
    ]
    assert ops[2]["choice"]["method"] == "unanimous" and ops[2]["candidates"][0]["samples"] == 3
    assert "16.0" in (tmp_path / "repo" / "tests" / "test_cart.py").read_text()
    decisions = traj["info"]["navigator"]["decisions"]
    assert [(d["step"], d["approved"]) for d in decisions] == [(2, False), (3, True), (4, True)]  # one per pick
