"""What the run page's HTML says, read without a browser: its charts (a free run's, a run of attempts', the reproduction
tests' bar), the code context's outlines, the header's tokens, the marks of attempts and decisions in the tree, a
mini-swe-agent run's costs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import agent_script
import attempts_scripts
import pytest
import yaml
from conftest import make_git_repo
from inspector_support import cli, reproduction_run

from llm_ide import run_attempts
from llm_ide.config import load_config
from llm_ide.run.trajectory import load_trajectory


def test_a_free_runs_charts_say_their_real_maximum(demo_run: tuple[dict, Path]) -> None:
    """The demo's scripted model is free: its cost chart is flat and says max 0 (it said max 1.0000)."""
    page = demo_run[1].read_text()
    captions = re.findall(r"<figcaption>([^<]+) <span class=\"dim\">\(max ([^)]+)\)</span>", page)
    assert [title for title, _ in captions] == ["prompt characters", "input tokens: cached | uncached", "cost ($)"]
    assert captions[2][1] == "0.0000" and all(int(top.replace(",", "")) > 0 for _, top in captions[:2])


@pytest.mark.parametrize("instance", ["pallets__flask-5014", "psf__requests-1142"])
def test_a_mini_swe_agent_runs_calls_carry_their_cost(shared_dir: Path, instance: str) -> None:
    """Each call's cost is its usage's (litellm's `cost`): the page's cost chart was all zeros."""
    from llm_ide.inspector.load import load_run

    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json"
    run = load_run(source)
    total = json.loads(source.read_text())["info"]["model_stats"]["instance_cost"]
    assert all(call.cost > 0 for call in run.calls) and sum(call.cost for call in run.calls) == pytest.approx(total)


def test_attempts_side_by_side_and_decision_marks(tmp_path: Path) -> None:
    """Fields a trajectory carries for attempts (info.attempts, each operation's `attempt`) and for decisions (a
    denied permission, a review round, sampled candidates): each attempt in its own band, each decision its mark."""
    import re

    from llm_ide.inspector.load import load_run
    from llm_ide.inspector.page import run_page

    def op(attempt: int, node: int, parent: int | None, **extra: object) -> dict:
        params = {"command": f"step {attempt}.{node}"}
        return {"id": node, "parent_id": parent, "attempt": attempt, "action_type": "bash", "action_params": params,
                "observation": f"out {attempt}.{node}", **extra}  # fmt: skip

    operations = [
        op(1, 0, None), op(1, 1, 0, denied=True, lessons="navigator: not in the plan"), op(1, 2, 0),
        op(2, 0, None, candidates=[{"action_params": {"command": c}} for c in ("ls", "ls -la")]),
        op(2, 1, 0, review={"passed": False, "comment": "no test"}),
        op(2, 2, 1),
    ]  # fmt: skip
    attempts = [{"index": 1, "score": 3.0, "exit_status": "submitted"},
                {"index": 2, "score": 8.5, "chosen": True, "exit_status": "submitted"}]  # fmt: skip
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text(json.dumps({"format": "llm-ide-1", "info": {"exit_status": "submitted", "attempts": attempts},
                                      "operations": operations}))  # fmt: skip
    page = run_page(load_run(trajectory))
    marks = dict(re.findall(r'<g class="node ([^"]*)" data-key="(\d+:\d+)"', page)[i][::-1] for i in range(6))
    assert marks == {"1:0": "chain", "1:1": "failed denied", "1:2": "chain", "2:0": "chain sampled",
                     "2:1": "chain review", "2:2": "chain"}  # fmt: skip
    assert re.findall(r'<text class="band" x="[\d.]+" y="13">(attempt \d)</text>', page) == ["attempt 1", "attempt 2"]
    assert re.findall(r'class="attempt( chosen)?" data-attempt="(\d)"', page) == [("", "1"), (" chosen", "2")]
    assert "attempt 2 · score 8.5 · chosen" in page


@pytest.fixture(scope="module")
def attempts_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run of two attempts of three steps each, reviewed, neither accepted, the chooser's pick (its trajectory), and
    its page."""
    folder = tmp_path_factory.mktemp("attempts")
    repo = make_git_repo(folder / "repo", attempts_scripts.FILES)
    scripts = [attempts_scripts.attempt_script(fix) for fix in (attempts_scripts.WRONG, attempts_scripts.RIGHT)]
    reviews = [attempts_scripts.review(2, "no"), attempts_scripts.review(9, "ok")]
    model = attempts_scripts.scripts(folder / "s", scripts, reviews, [attempts_scripts.choice(2, "it fixes it")])
    settings = load_config("default", environment={"tools": []}, attempts={"max": 2, "accept_score": 10})
    out = folder / "out"
    result = run_attempts(attempts_scripts.TASK, model=model, settings=settings, output_dir=out, run_id="T", repo=repo)
    assert cli("inspect", str(result.trajectory_path), "--html", str(folder / "p.html")).returncode == 0
    return result.trajectory_path, (folder / "p.html").read_text()


def test_a_run_of_attempts_charts_each_attempts_steps_apart(attempts_run: tuple[Path, str]) -> None:
    """Each chart bar summed the same step of both attempts (`step 1: 4,874`, no prompt's size), and the chooser's call
    was a `step 3` bar before them."""
    trajectory, page = attempts_run
    chart = re.search(r"<figcaption>prompt characters .*?</svg>", page, re.S)
    assert chart is not None
    shown = re.findall(r"<title>([^<]*): ([\d,]+)</title>", chart.group(0))
    sums: dict[str, int] = {}
    for call in load_trajectory(trajectory)["model_calls"]:  # a review: with its attempt's last step
        key = f"attempt {call['attempt']}, step {call.get('step', 2) + 1}" if call["attempt"] else "choice"
        sums[key] = sums.get(key, 0) + call["prompt_chars"]
    assert shown == [(key, f"{chars:,}") for key, chars in sums.items()]
    assert [key for key, _ in shown] == [f"attempt {a}, step {s}" for a in (1, 2) for s in (1, 2, 3)] + ["choice"]


def test_a_run_of_attempts_names_where_its_code_context_is(attempts_run: tuple[Path, str]) -> None:
    """The run's own trajectory holds no code context, each attempt's does: the page said the run's held no chunk."""
    trajectory, page = attempts_run
    own = [attempt["trajectory"] for attempt in load_trajectory(trajectory)["info"]["attempts"]]
    assert all(load_trajectory(trajectory.parent / path)["code_context"] for path in own)
    said = f"each attempt's code context is in its own trajectory ({', '.join(own)}, beside this run's)."
    assert said in page and "held no chunk" not in page


@pytest.mark.parametrize("every", [0, 2])
def test_the_code_context_outlines_the_chunks_each_steps_prompt_held(tmp_path: Path, every: int) -> None:
    """A chunk's cell was outlined whenever its score was above the threshold, as if each prompt rendered the context
    anew: the prompts build on a snapshot renewed now and then (here never, or every 2 operations), and a demo's five
    prompts, all 'No code in context yet', had every cell outlined."""
    script = agent_script.write_script(tmp_path / "s.yaml", agent_script.FIX_SCRIPT)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "memory": {"snapshot_every": every}}))
    run = ["run", "--repo", str(repo), "--task", "Fix Cart.total.", "--model", script, "--config", str(config)]
    assert cli(*run, "--thread-id", "t", "--output", str(tmp_path / "out")).returncode == 0
    assert cli("inspect", str(tmp_path / "out" / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    data = json.loads(re.findall(r'<script id="run-data" [^>]*>(.*?)</script>', (tmp_path / "p.html").read_text())[0])
    calls = load_trajectory(tmp_path / "out" / "t.traj.json")["model_calls"]
    prompts = {call["step"]: call["prompt"] for call in calls}
    contexts = [prompts[step].split("## Code Context (as of ")[-1].split("\n## ")[0] for step in sorted(prompts)]
    outlined = {(chunk["file"], tuple(chunk["lines"])): chunk["shown"] for chunk in data["chunks"]}

    def held(file: str, lines: tuple[int, ...], context: str) -> bool:
        return f"### File: `{file}`" in context and any(f"{line:>6}\t" in context for line in lines)

    assert outlined == {key: [held(*key, context) for context in contexts] for key in outlined}
    assert any(map(any, outlined.values())) == bool(every)


def test_the_reproduction_tests_written_before_the_first_step_have_their_own_bar(tmp_path: Path) -> None:
    """The charts' `step 1` bar summed the reproduction tests' prompts with the first step's, a size no prompt had."""
    trajectory = reproduction_run(tmp_path)
    chart = re.search(r"<figcaption>prompt characters .*?</svg>", (tmp_path / "p.html").read_text(), re.S)
    assert chart is not None
    calls = load_trajectory(trajectory)["model_calls"]
    written = sum(call["prompt_chars"] for call in calls if call["kind"] == "write_reproduction")
    steps = [(f"step {call['step'] + 1}", f"{call['prompt_chars']:,}") for call in calls if call["kind"] == "act"]
    shown = re.findall(r"<title>([^<]*): ([\d,]+)</title>", chart.group(0))
    assert shown == [("reproduction tests written", f"{written:,}"), *steps] and written > 0


def test_a_mini_swe_agent_pages_header_says_the_tokens_its_trajectory_holds(shared_dir: Path, tmp_path: Path) -> None:
    """mini-swe-agent keeps each reply's usage (litellm's): its page said no tokens (its panel each call's); where
    some replies lack it, the tokens are said as those of the calls that had it, and with none, not at all."""
    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / "pallets__flask-5014.traj.json"
    data = json.loads(source.read_text())
    replies = [m for m in data["messages"] if m["role"] == "assistant"]
    usages = [m["extra"]["response"]["usage"] for m in replies]
    assert len(replies) == data["info"]["model_stats"]["api_calls"] == 20

    def header(trajectory: Path) -> str | None:
        page = trajectory.with_suffix(".html")
        assert cli("inspect", str(trajectory), "--html", str(page)).returncode == 0
        found = re.search(r'<span id="tokens">([^<]*)</span>', page.read_text())
        return found.group(1) if found else None

    sums = [sum(u[key] for u in usages) for key in ("prompt_tokens", "completion_tokens")]
    assert header(source) == f"{sums[0]}+{sums[1]} tokens" and sums[0] > 0
    for message in replies[5:]:
        del message["extra"]["response"]["usage"]
    (part := tmp_path / "part.traj.json").write_text(json.dumps(data))
    sums = [sum(u[key] for u in usages[:5]) for key in ("prompt_tokens", "completion_tokens")]
    assert header(part) == f"{sums[0]}+{sums[1]} tokens (the usage of 5 of 20 calls)"
    for message in replies[:5]:
        del message["extra"]["response"]["usage"]
    (none := tmp_path / "none.traj.json").write_text(json.dumps(data))
    assert header(none) is None
