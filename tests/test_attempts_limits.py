"""Attempts' limits and settings (issue 11): attempts stopped at their step limit go on under a higher one, a finished
run given a higher `attempts.max` adds attempts, one cost budget for the task (the reviewer's calls in it), the
reviewer's and chooser's models checked before anything starts, and `evaluate` counting a run without attempts as
one try."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, review, scripts
from attempts_support import NO_TOOLS, prompts, settings
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer, Reply

from llm_ide import run_attempts, run_task  # the Python API
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.swebench.attempts import AttemptsReport


@pytest.mark.parametrize("parallel", [False, True])
def test_attempts_stopped_at_their_step_limit_go_on_when_the_run_is_given_a_higher_one(
    tmp_path: Path, parallel: bool
) -> None:
    """A finished run whose attempts reached their step limit was its result again whatever limit it was given: the
    attempts go on from their last step (not anew), are reviewed and chosen among again; one after the other, the
    first accepted stops the rest, as in a fresh run. All at once, a higher attempts.max adds none, and the attempts
    say how many there are (they said "attempt 1 of 3")."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(3, "Unfinished."), review(1, "Unfinished."), review(9, "Removes the + 1."), review(2, "README.")]
    attempts = [attempt_script(RIGHT), attempt_script(WRONG), attempt_script(WRONG)]  # (the third never runs)
    model = scripts(tmp_path / "scripts", attempts, reviews)
    events: list[str] = []

    def run(step_limit: int, most: int = 2):
        given = settings(max=most, parallel=parallel).merged({"agent": {"step_limit": step_limit}})
        return run_attempts(TASK, model=model, settings=given, output_dir=tmp_path / "out", run_id="T", repo=repo,
                            on_event=lambda event: events.append(event.phase))  # fmt: skip

    first = run(2)
    assert (first.exit_status, [(a["exit_status"], a["score"]) for a in first.attempts]) == (
        "step_limit",
        [("step_limit", 3.0), ("step_limit", 1.0)],
    )
    events.clear()
    assert run(2).attempts == first.attempts  # the same limit: its result again, nothing run
    more = "" if parallel else "a higher attempts.max adds attempts, "  # (none accepted)
    assert events == ["run T had already finished (step_limit): its result again; a higher limit continues the "
                      f"attempts stopped at one, {more}a new `run_id` or `output_dir` runs the task "
                      "anew"]  # fmt: skip
    events.clear()
    going = run(0, most=3)  # all at once, the attempts run are all there are: no third one, none said
    assert (
        "run T had stopped at a limit: 2 attempts (1, 2) going on from their last step, under the limits given now"
        in events
    )
    assert sorted(e for e in events if e.startswith("attempt ") and " of " in e) == (  # (at once: in any order)
        ["attempt 1 of 2", "attempt 2 of 2"] if parallel else ["attempt 1 of 3"]
    )
    went_on = [("submitted", 9.0), ("submitted", 2.0)] if parallel else [("submitted", 9.0), ("step_limit", 1.0)]
    assert [(a["exit_status"], a["score"]) for a in going.attempts] == went_on  # sequential: 1 accepted, 2 left
    assert (going.exit_status, going.chosen) == ("submitted", 1)
    assert "-    return x + x + 1  # BUG\n+    return x + x" in going.submission
    assert len(prompts(tmp_path / "out", 1)) == 3  # 2 steps, then the third: from its last step, not anew
    assert len(prompts(tmp_path / "out", 2)) == (3 if parallel else 2)
    assert (repo / "calc.py").read_text() == FILES["calc.py"]
    traj = json.loads(going.trajectory_path.read_text())
    assert [c["kind"] for c in traj["model_calls"] if c["kind"] == "review"] == ["review"] * (4 if parallel else 3)


@pytest.mark.parametrize("parallel", [False, True])
def test_a_finished_run_given_a_higher_attempts_max_adds_attempts_unless_one_was_accepted(
    tmp_path: Path, parallel: bool
) -> None:
    """Two attempts, none accepted: given `attempts.max: 3` the run said "already finished" and ran nothing. One after
    another, attempt 3 now runs and the choice is made among the three; all at once, the attempts run are all there
    are. An accepted attempt stays the result whatever the maximum."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts = [attempt_script(WRONG), attempt_script(WRONG), attempt_script(RIGHT), attempt_script(WRONG)]
    reviews = [review(3, "No."), review(2, "No."), review(9, "Fixes it.")]
    model = scripts(tmp_path / "scripts", attempts, reviews)  # (the fourth never runs)
    events: list[str] = []

    def run(most: int):
        given = settings(max=most, parallel=parallel, accept_score=8)
        return run_attempts(TASK, model=model, settings=given, output_dir=tmp_path / "out", run_id="T", repo=repo,
                            on_event=lambda event: events.append(event.phase))  # fmt: skip

    first = run(2)
    assert [(a["index"], a["score"]) for a in first.attempts] == [(1, 3.0), (2, 2.0)]
    events.clear()
    assert run(2).attempts == first.attempts
    hint = "" if parallel else "a higher attempts.max adds attempts, "
    assert events == [f"run T had already finished (submitted): its result again; {hint}a new `run_id` or "
                      "`output_dir` runs the task anew"]  # fmt: skip
    events.clear()
    more = run(3)
    if parallel:
        assert more.attempts == first.attempts and events[0].startswith("run T had already finished (submitted)")
        return
    assert "run T had finished: none of its 2 accepted, attempts to 3 follow" in events
    assert [(a["index"], a["score"]) for a in more.attempts] == [(1, 3.0), (2, 2.0), (3, 9.0)]
    assert (more.exit_status, more.chosen) == ("submitted", 3)
    assert "-    return x + x + 1  # BUG\n+    return x + x" in more.submission
    assert (repo / "calc.py").read_text() == FILES["calc.py"]
    events.clear()
    assert run(4).attempts == more.attempts  # attempt 3 accepted: the result again
    assert events[0].startswith("run T had already finished (submitted): its result again")


def test_an_attempts_run_stopped_at_its_step_limit_prints_the_command_that_goes_on_and_it_does(tmp_path: Path) -> None:
    """`run` with attempts printed nothing after a step limit (a single run prints the command that goes on)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(2, "Unfinished.")] * 4 + [review(9, "Fixed.")]
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(WRONG)], reviews)
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": 2}}))
    args = [
        "run",
        "--repo",
        str(repo),
        "--task",
        TASK,
        "--model",
        model,
        "--thread-id",
        "T",
        "-o",
        str(tmp_path / "out"),
    ]
    stopped = invoke(*args, "-c", str(config), "--step-limit", "1", cwd=tmp_path)
    said = stopped.stderr.splitlines()
    assert stopped.returncode == 1 and said[-2] == "it goes on from its last step with a higher step limit:", said
    again = shlex.split(said[-1])
    assert again == ["llm-ide", *args, "-c", str(config), "--step-limit", "2"]
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 1 and shlex.split(went_on.stderr.splitlines()[-1])[-1] == "4"  # at 2: on again
    done = invoke(*again[1:-1], "0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "attempt 1: submitted, score 9, $0.0000 (chosen)" in done.stdout
    assert "… review: attempt 1 scored 9 — Fixed.\n… chosen: attempt 1 (accept_score) — Fixed.\n" in done.stdout
    assert "attempt 2: step_limit, score 2" in done.stdout  # attempt 1 accepted: the second stays where it was
    assert len(prompts(tmp_path / "out", 1)) == 3 and len(prompts(tmp_path / "out", 2)) == 2


def test_one_cost_budget_for_the_task_stops_the_attempt_under_way_and_the_next_ones(tmp_path: Path) -> None:
    """gpt-5-mini prices, 100k prompt tokens a call ($0.025): the task's $0.08 have room for three calls, not a
    fourth (a call starts only when one more call as dear as the dearest so far still fits)."""
    replies = [Reply(text, input_tokens=100_000, output_tokens=10) for text in attempt_script(RIGHT)]
    with OpenAIServer(replies=replies) as server:
        result = run_attempts(
            TASK,
            model="gpt-5-mini",
            base_url=server.url,
            output_dir=tmp_path / "out",
            run_id="T",
            settings=settings(max=3, cost_limit=0.08).merged({"agent": {"single_call": False}}),
            repo=make_git_repo(tmp_path / "repo", FILES),
        )
        requests = len(server.requests)  # fmt: skip
    assert requests == 3  # act, reflect, act: no fourth agent call, no review, no second attempt
    assert result.exit_status == "cost_limit"
    assert [(a["index"], a["exit_status"], a["score"]) for a in result.attempts] == [(1, "cost_limit", None)]
    assert result.chosen == 1 and "+    return x + x\n" in result.submission  # its patch is still the task's
    assert result.model_stats["cost"] == pytest.approx(3 * (100_000 * 0.25 + 10 * 2.0) / 1e6)
    assert result.model_stats["cost"] <= 0.08


def test_a_reviewers_call_cut_off_before_its_node_saved_stays_in_the_runs_cost(tmp_path: Path) -> None:
    """Ctrl-C as the reviewer's paid reply is told, before the review is saved: the resumed run asks the reviewer
    again, and the first call's $1 was in no total (the run's cost, its trajectory, the task's budget)."""
    dollar = {"input_tokens": 1_000_000, "output_tokens": 0}
    attempt, reviewed = [Reply(text, **dollar) for text in attempt_script(RIGHT)], Reply(review(9, "Fixed."), **dollar)
    prices = {"gpt-test": {"input": 1.0, "output": 0.0}}
    config = settings(max=2, accept_score=8).merged(
        {"agent": {"single_call": False, "cost_limit": 0}, "model": {"prices": prices}}
    )
    run = {"model": "gpt-test", "output_dir": tmp_path / "out", "run_id": "T", "settings": config}
    repo = make_git_repo(tmp_path / "repo", FILES)

    def ctrl_c_at_the_score(event) -> None:
        if event.kind == "phase" and event.phase.startswith("review: attempt 1 scored"):
            raise KeyboardInterrupt

    with OpenAIServer(replies=[*attempt, reviewed]) as server, pytest.raises(KeyboardInterrupt):
        run_attempts(TASK, base_url=server.url, repo=repo, on_event=ctrl_c_at_the_score, **run)
    with OpenAIServer(replies=[reviewed]) as server:  # the resumed run: the review again (the attempt is kept)
        result = run_attempts(TASK, base_url=server.url, repo=repo, **run)
        hits = server.hits
    assert (hits, result.exit_status, result.chosen) == (1, "submitted", 1)
    paid = len(attempt) + 2
    assert (result.model_stats["cost"], result.model_stats["discarded_calls"]) == (paid, 1)
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert traj["info"]["model_stats"]["cost"] == paid
    assert [c["kind"] for c in traj["model_calls"]].count("review") == 1  # the history: the review that was saved


@pytest.mark.parametrize(
    ("attempts", "missing", "line"),
    [
        (
            {"max": 2},
            "attemptreview.yaml",
            "attempts.reviewer.model: scripted model: file not found: {s}/attemptreview",
        ),
        ({"max": 2}, "attemptchoose.yaml", "attempts.chooser.model: scripted model: file not found: {s}/attemptchoose"),
        ({"max": 2, "choose": "best_score"}, "attemptchoose.yaml", None),  # no chooser: its file is not needed
        ({"max": 2, "reviewer": {"model": "opneai:gpt"}}, None, "attempts.reviewer.model: model opneai:gpt: unknown"),
    ],  # the reviewer's and chooser's models were first built after the attempts had run (and been paid for)
)
def test_the_reviewers_and_choosers_models_are_checked_before_anything_starts(
    tmp_path: Path, attempts: dict, missing: str | None, line: str | None
) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "s", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(9, "Fixed.")])
    if missing:
        (tmp_path / "s" / missing).unlink()
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": attempts}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(config)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})
    run = dict(model=model, settings=settings(**attempts), output_dir=tmp_path / "api", run_id="T", repo=repo)
    if line is None:
        assert done.returncode == 0 and run_attempts(TASK, **run).exit_status == "submitted", done.stderr
        return
    line = line.replace("{s}", str(tmp_path / "s"))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1) and done.stderr.startswith(f"error: {line}")
    with pytest.raises(UsageError, match=f"^{line}"):
        run_attempts(TASK, **run)
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout == ""


@pytest.mark.parametrize("most", [None, 1])
def test_a_model_per_attempt_in_a_run_without_attempts_is_one_line(tmp_path: Path, most: int | None) -> None:
    """The preflight checked the first attempt's script, then the run looked for `attempt{attempt}.yaml` itself."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "s", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    config = {**NO_TOOLS, **({"attempts": {"max": most}} if most else {})}
    (path := tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--config", str(path)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})
    line = f"model {model}: `{{attempt}}` names one model per attempt: give attempts.max > 1"
    assert (done.returncode, done.stderr) == (2, f"error: {line}\n")
    run = dict(model=model, settings=load_config("default", **config), output_dir=tmp_path / "api", run_id="T")
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api(TASK, **run, repo=repo)
        assert str(raised.value) == line
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()


@pytest.mark.parametrize(
    ("attempts", "k", "passed"),
    [
        ({"a": {}, "b": {}}, 1, 1),  # a batch without attempts (each instance's run is its one try): it said pass@0
        ({}, 1, 1),
        ({"a": {1: "resolved"}, "b": {1: "unresolved", 2: "resolved"}}, 2, 2),
    ],
)
def test_evaluate_attempts_counts_a_run_without_attempts_as_one_try(attempts: dict, k: int, passed: int) -> None:
    graded = AttemptsReport({"a": "resolved", "b": "unresolved"}, attempts).to_json()
    assert (graded["k"], graded["pass_at_k_count"], graded["chosen_resolved_count"]) == (k, passed, 1)
    assert graded["pass_at_k"] == passed / 2
