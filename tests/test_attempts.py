"""Attempts at one task (issue 11), driven by the scripted model in the local environment (a git worktree each): the
reviewer and the chooser, what inspect and the console say of each attempt, what the listeners and the graph's
stream get (kills and resumes: test_attempts_resume.py; limits and settings: test_attempts_limits.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from attempts_scripts import FILES, RIGHT, TASK, TEST, WRONG, attempt_script, choice, review, scripts, write
from attempts_support import NO_TOOLS, prompts, settings
from conftest import make_git_repo
from in_process import invoke

from llm_ide import run_attempts  # the Python API
from llm_ide.attempts.context import worktree
from llm_ide.errors import UsageError
from llm_ide.inspector.load import load_run
from llm_ide.inspector.page import run_page


def test_the_reviewer_stops_at_the_accepted_attempt_and_its_critique_reaches_the_next(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG, "The README is not the code."), attempt_script(RIGHT), attempt_script(RIGHT)],
        [review(2, "The patch only edits the README; calc.double still adds 1."), review(9, "Removes the + 1.")],
    )
    result = run_attempts(TASK, model=model, settings=settings(max=3), output_dir=tmp_path / "out", run_id="T",
                          repo=repo)  # fmt: skip
    assert result.exit_status == "submitted"
    assert [a["index"] for a in result.attempts] == [1, 2]  # accepted at 2: no third attempt
    assert [a["score"] for a in result.attempts] == [2.0, 9.0]
    assert result.chosen == 2
    assert "-    return x + x + 1  # BUG\n+    return x + x" in result.submission
    assert "README" not in result.submission
    assert (repo / "calc.py").read_text() == FILES["calc.py"]  # each attempt worked in its own worktree

    second = prompts(tmp_path / "out", 2)[0]
    lessons = second.split("## Lessons Learned", 1)[1]
    assert "Attempt 1 (submitted, review score 2/10) was not accepted: The patch only edits the README" in lessons
    assert "- The README is not the code." in lessons
    assert "Lessons Learned" in prompts(tmp_path / "out", 1)[0]
    assert "The README is not the code" not in prompts(tmp_path / "out", 1)[0]

    traj = json.loads(result.trajectory_path.read_text())
    outcomes = [(a["index"], a["chosen"], a["score"]) for a in traj["info"]["attempts"]]
    assert outcomes == [(1, False, 2.0), (2, True, 9.0)]
    assert traj["info"]["choice"]["by"] == "accept_score"
    assert {op["attempt"] for op in traj["operations"]} == {1, 2}
    assert [c["kind"] for c in traj["model_calls"] if c["kind"] in ("review", "choose")] == ["review", "review"]
    review_prompt = next(c["prompt"] for c in traj["model_calls"] if c["kind"] == "review")
    assert "double(2) = 5" in review_prompt  # the attempt's test output reached the reviewer
    assert "README.md" in review_prompt and "The README is not the code." in review_prompt
    with gzip.open(tmp_path / "out" / "T.calls.jsonl.gz", "rt") as log:  # complete: a plain gzip reader reads it
        assert [json.loads(line)["kind"] for line in log] == ["review", "review"]

    run = load_run(result.trajectory_path)  # the inspector's view: a band per attempt, scores, the choice
    assert [(a.index, a.chosen, a.score) for a in run.attempts] == [(1, False, 2.0), (2, True, 9.0)]
    assert [(n.attempt, n.id) for n in run.nodes] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert all("chain" in n.marks for n in run.nodes)
    page = run_page(run)
    assert 'title="The patch only edits the README; calc.double still adds 1."' in page
    assert "attempt 2 · score 9.0 · chosen" in page

    logged = [
        line.split(" INFO llm_ide.attempts: ")[1] for line in (tmp_path / "out" / "T.log").read_text().splitlines()
    ]
    assert logged == [  # the run's own log was empty: what each attempt did, the reviews, the choice and why
        "attempt 1 of 3",
        f"attempt 1: submitted — 7 patch lines, $0.0000, 3 calls; its log: {tmp_path}/out/attempt1/T-attempt1.log",
        "review: attempt 1 scored 2 — The patch only edits the README; calc.double still adds 1.",
        "attempt 2 of 3",
        f"attempt 2: submitted — 8 patch lines, $0.0000, 3 calls; its log: {tmp_path}/out/attempt2/T-attempt2.log",
        "review: attempt 2 scored 9 — Removes the + 1.",
        "chosen: attempt 2 (accept_score) — Removes the + 1.",
    ]
    assert all((tmp_path / "out" / f"attempt{i}" / f"T-attempt{i}.log").is_file() for i in (1, 2))


@pytest.mark.parametrize(("mode", "choices", "by"), [("model", [choice(2, "Only candidate 2 fixes calc.")], "chooser"),
                                                     ("best_score", [], "best_score")])  # fmt: skip
def test_the_chooser_picks_the_right_one_of_the_distinct_patches(tmp_path: Path, mode: str, choices, by: str) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG), attempt_script(WRONG), attempt_script(RIGHT)],
        [review(3, "README only."), review(3, "README only."), review(6, "Plausible.")],
        [choice(1, "the agent's chooser file: not used when attempts.chooser.model is set")],
    )
    chooser = write(tmp_path / "elsewhere", "chooser.yaml", choices or ["unused"])  # a model of its own
    config = settings(max=3, choose=mode, chooser={"model": f"scripted:{chooser}"})
    result = run_attempts(TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id="T", repo=repo)
    assert [a["index"] for a in result.attempts] == [1, 2, 3]
    assert result.chosen == 3
    assert "+    return x + x\n" in result.submission
    traj = json.loads(result.trajectory_path.read_text())
    assert traj["info"]["choice"]["by"] == by
    chooser = [c for c in traj["model_calls"] if c["kind"] == "choose"]
    if mode == "model":
        assert traj["info"]["choice"]["reasons"] == "Only candidate 2 fixes calc."
        (call,) = chooser
        assert "## Candidate 1 (attempts 1, 2" in call["prompt"]  # attempts 1 and 2 made the same patch: one candidate
        assert "## Candidate 2 (attempts 3" in call["prompt"]
        assert "## Candidate 3" not in call["prompt"]
        assert "[1] bash: Applied." in call["prompt"]  # each candidate's reasoning summary
    else:
        assert chooser == []
    inspected = invoke("inspect", str(result.trajectory_path))
    assert inspected.returncode == 0, inspected.stderr
    shown = inspected.stdout
    assert "attempt 1: submitted, score 3" in shown and "attempt 3: submitted, score 6 (chosen)" in shown
    assert f"chosen: attempt 3 ({by}) — " in shown


def test_inspect_says_the_choice_as_the_run_said_it(tmp_path: Path) -> None:
    """No attempt changed a file: the run said `chosen: none (no patch) — no attempt changed a file`, inspect
    `chosen: no attempt (none) no attempt changed a file` (the reasons without their dash elsewhere too)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script("true")] * 2, [review(3, "No change."), review(4, "None.")])
    argv = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--output", "out", "--thread-id", "T"]
    config = tmp_path / "attempts.yaml"
    config.write_text(yaml.safe_dump({"attempts": {"max": 2}, **NO_TOOLS}))
    done = invoke(*argv, "-c", str(config), cwd=tmp_path)
    line = "chosen: none (no patch) — no attempt changed a file\n"
    assert done.returncode == 0 and f"… {line}" in done.stdout, done.stdout + done.stderr
    inspected = invoke("inspect", "out/T.traj.json", cwd=tmp_path)
    assert inspected.returncode == 0 and line in inspected.stdout, inspected.stdout


def test_inspect_says_which_attempt_each_model_call_is_of(tmp_path: Path) -> None:
    """The calls table of a run of attempts had no attempt column: its two `review` rows (and each attempt's `act`
    rows) could not be told apart. The chooser's call, of them all, is `—`."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)], [review(3, "No."), review(4, "So so.")]
    )
    config = settings(max=2, choose="model")
    result = run_attempts(TASK, model=model, settings=config, output_dir=tmp_path / "out", run_id="T", repo=repo)
    inspected = invoke("inspect", str(result.trajectory_path))
    assert inspected.returncode == 0, inspected.stderr
    table = inspected.stdout.partition("┃ call")[2].splitlines()  # (the tree above draws │ too)
    rows = [[cell.strip() for cell in line.split("│")[1:4]] for line in table if line.startswith("│")]
    assert rows == [
        *([str(n), "1", "act"] for n in range(3)),
        *([str(n), "2", "act"] for n in range(3, 6)),
        ["6", "1", "review"],
        ["7", "2", "review"],
        ["8", "—", "choose"],
    ]


def test_the_console_names_each_attempts_log_where_it_is(tmp_path: Path) -> None:
    """`--output out`: the console said `its log: attempt1/T-attempt1.log`, relative to the output folder, a path
    that is not there from where the command ran."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(3, "Hm."), review(4, "Hm.")])
    (config := tmp_path / "attempts.yaml").write_text(yaml.safe_dump({"attempts": {"max": 2}, **NO_TOOLS}))
    argv = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "-c", str(config), "--output", "out"]
    done = invoke(*argv, "--thread-id", "T", cwd=tmp_path)
    logs = [line.split("; its log: ")[1] for line in done.stdout.splitlines() if "; its log: " in line]
    assert logs == ["out/attempt1/T-attempt1.log", "out/attempt2/T-attempt2.log"], done.stdout + done.stderr
    assert all((tmp_path / log).is_file() for log in logs)


@pytest.mark.parametrize("dirty", [False, True])
def test_attempts_warn_that_uncommitted_changes_are_not_theirs(tmp_path: Path, dirty: bool) -> None:
    """A plain run warns that uncommitted changes go into its patch; attempts start from the commit without them, and
    said nothing."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    if dirty:
        (repo / "README.md").write_text("calc, work in progress\n")
        (repo / "notes.txt").write_text("todo\n")
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(9, "Fixed.")])  # the second never runs
    (config := tmp_path / "config.yaml").write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": 2}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T", "--config", str(config)]
    done = invoke(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout[:12]
    warning = (
        "… warning: the repository has uncommitted changes (README.md, notes.txt): each attempt starts from commit "
        f"{head} without them; commit them for the attempts to have them"
    )
    assert (warning in done.stdout.splitlines()) == dirty, done.stdout
    assert "uncommitted" not in done.stdout.replace(warning, "")  # the attempts' own worktrees are clean
    patch = (tmp_path / "out" / "T.patch").read_text()
    assert "+    return x + x\n" in patch and "todo" not in patch and "work in progress" not in patch


@pytest.mark.parametrize("attempts", [1, 2])
def test_run_attempts_tells_each_listener_run_task_does(tmp_path: Path, attempts: int) -> None:
    """`run_attempts(on_model_call=…)` was refused ("the run takes no argument"), and the command line's live status
    (the model's call, the command under way) saw nothing of an attempt's."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)] * 2, [review(9, "Fixed.")])  # the second never runs
    calls, commands, events = [], [], []
    model = model if attempts > 1 else model.replace("{attempt}", "1")  # one attempt: the agent's run itself
    run = {"model": model, "settings": settings(max=attempts), "repo": repo, "run_id": "T"}
    told = {"on_model_call": calls.append, "on_command": commands.append, "on_event": events.append}
    result = run_attempts(TASK, output_dir=tmp_path / "out", **run, **told)
    assert result.exit_status == "submitted"
    own = tmp_path / "out" / ("attempt1/T-attempt1.traj.json" if attempts > 1 else "T.traj.json")
    asked = len(json.loads(own.read_text())["model_calls"])
    assert [c.kind for c in calls if c.kind != "text"] == ["start", "end"] * asked and asked == 3
    ran = [(c.command, c.returncode) for c in commands if c.kind == "end"]
    assert ran == [(TEST, 1), (RIGHT, 0)]
    assert [e.command.command for e in events if e.kind == "command" and e.command.kind == "end"] == [TEST, RIGHT]
    with pytest.raises(UsageError, match="; it takes .*, on_event, on_model_call, ask, on_command$"):
        run_attempts(TASK, output_dir=tmp_path / "o", on_call=print, **run)


def test_the_graph_streams_each_attempts_steps_to_its_custom_stream(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide.attempts.context import AttemptsContext
    from llm_ide.attempts.graph import build_attempts_graph
    from llm_ide.run.request import RunRequest

    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)],
                    [review(1, "README only."), review(9, "Fixed.")])  # fmt: skip
    request = RunRequest(TASK, model, settings(max=2), tmp_path / "out", "S", repo=repo, environment="local")
    ctx = AttemptsContext(request)
    inputs = {"task": TASK, "repo": str(repo), "model": model}
    graph = build_attempts_graph(InMemorySaver())
    chunks = list(graph.stream(inputs, {"configurable": {"thread_id": "S"}}, context=ctx, stream_mode="custom"))
    assert [(c["attempt"], c["kind"], c["step"]) for c in chunks] == [
        (1, "step", 1), (1, "step", 2), (1, "step", 3), (1, "end", 3),
        (2, "step", 1), (2, "step", 2), (2, "step", 3), (2, "end", 3),
    ]  # fmt: skip
    assert chunks[5]["action"] == f"bash: {RIGHT}" and chunks[-1]["exit_status"] == "submitted"
    assert graph.get_state({"configurable": {"thread_id": "S"}}).values["chosen"] == 2


def test_parallel_attempts_add_their_worktrees_one_at_a_time(tmp_path: Path) -> None:
    """`git worktree add` of several attempts at once in one repository races on .git/worktrees ("failed to read
    .git/worktrees/repo3/commondir", 7 of 80 here without the lock): each attempt's worktree is added, whole."""
    repo = make_git_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    paths = [tmp_path / f"round{n // 8}" / f"attempt{n % 8}" / "repo" for n in range(24)]
    for path in paths:
        path.parent.mkdir(parents=True)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda path: worktree(repo, "add", "--detach", "-f", str(path), "HEAD"), paths))
    heads = {subprocess.run(["git", "rev-parse", "HEAD"], cwd=p, capture_output=True, text=True).stdout for p in paths}
    assert len(heads) == 1 and len(next(iter(heads)).strip()) == 40
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert sum(str(path) in listed for path in paths) == 24
