"""`llm-ide replay`'s metrics on hand-made runs whose prompts we know (what each prompt held, the bill at a profile's
prices, edits and references), the replay answering in the trajectory's own format, and our own runs replayed to the
same bill and word for word."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from replay_support import INSTANCE, MODULE, STEPS, cli, fingerprint, git, make_repo, mini_trajectory, report_of

from llm_ide.replay.formats import Request, Trajectory
from llm_ide.replay.measure import full_history_calls
from llm_ide.replay.metrics import Text, edit_lines, occurs, references
from llm_ide.replay.model import AGENTS, HISTORY
from llm_ide.replay.tree import FileChange, tracked_sections

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository and a trajectory whose submission is what its two edits make of it."""
    repo = make_repo(tmp_path / "repo")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    for _, command, _, _ in STEPS[1:3]:
        subprocess.run(command, shell=True, cwd=work, check=True)
    return repo, mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", STEPS, git(work, "diff"))


def test_a_hand_made_run_measures_what_each_prompt_held(demo: tuple[Path, Path], tmp_path: Path) -> None:
    repo, trajectory = demo
    before = fingerprint(repo)
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), "--html", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fingerprint(repo) == before  # the replay worked in its own checkout
    report = report_of(tmp_path / "out")
    assert (report.exit_status, report.same_as_submission, report.diverged) == ("submitted", True, "")
    assert [step.action for step in report.steps][-1] == "submit" and len(report.steps) == 6
    # step 2: the grep showed the line sed replaced; step 3: nobody showed omega_value's line
    assert report.steps[1].edited == ["m.py"] == report.steps[2].edited
    for agent in AGENTS:
        second, third = report.steps[1].agents[agent], report.steps[2].agents[agent]
        assert (second.pre_image.present, second.pre_image.total, second.edits_grounded) == (1, 1, 1)
        assert (third.pre_image.present, third.pre_image.total, third.edits_grounded) == (0, 1, 0)
        assert third.context.total == 6 and third.context.present == 0  # lines 22-24 and 26-28, never shown
    missed = {(m.agent, m.step, m.kind, m.what) for m in report.misses}
    assert {(agent, 3, "pre-image", "m.py:25: omega_value = 2") for agent in AGENTS} <= missed
    # step 4: 15 came from the grep's output, 16 from nowhere; step 5: a name the model invented is no reference
    assert report.steps[3].references == ["15"] and report.steps[4].references == []
    assert all(report.steps[3].agents[agent].references.present == 1 for agent in AGENTS)
    assert "omega_value = 2" in done.stdout and "the final tracked files are equal" in done.stdout
    # every replayed output is the original's: full history on them is the original, request for request
    billed = [[(s.agents[a].raw, s.agents[a].cached, s.agents[a].bill) for s in report.steps] for a in AGENTS[1:]]
    assert billed == [[(s.agents[HISTORY].raw, s.agents[HISTORY].cached, s.agents[HISTORY].bill) for s in report.steps]]
    page = (tmp_path / "out" / f"{INSTANCE}.html").read_text()
    assert 'id="replay-misses"' in page and "m.py:25: omega_value = 2" in page
    wire = [json.loads(line) for line in (tmp_path / "out" / "wire.jsonl").read_text().splitlines()]
    assert [(call["step"], call["kind"]) for call in wire[:3]] == [(1, "act"), (2, "act"), (3, "act")]  # single-call
    # the verdict, then the thought whose first sentence is the reflection's summary, then the bare command
    sed = STEPS[1][1]
    assert wire[1]["response"] == f"good\nLine 15 sets it: raise it.\n<bash>{sed}</bash>"
    run = json.loads(Path(report.run_trajectory).read_text())
    assert run["operations"][0]["summary"] == "Line 15 sets it: raise it."
    assert run["operations"][1]["action_params"] == {"command": sed}


def test_the_replay_answers_with_tool_calls_in_tools_format(demo: tuple[Path, Path], tmp_path: Path) -> None:
    """`--action-format tools`: llm-ide's requests carry the actions as tools (the same list in each), the loopback
    answers each act call with the action as a tool call in OpenAI's wire format, the run does what the text format's
    does, and both bills count what was sent (the tools, the calls' arguments) and written."""
    repo, trajectory = demo
    for kind in ("text", "tools"):
        args = ["replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / kind), "--action-format", kind]
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"llm-ide's actions as {kind}" in done.stdout
    text, tools = report_of(tmp_path / "text"), report_of(tmp_path / "tools")
    assert (tools.action_format, tools.exit_status, tools.same_as_submission) == ("tools", "submitted", True)
    assert tools.diverged == "" and text.action_format == "text"
    operations = [json.loads(Path(r.run_trajectory).read_text())["operations"] for r in (text, tools)]
    assert [(o["action_type"], o["action_params"]) for o in operations[0]] == [
        (o["action_type"], o["action_params"]) for o in operations[1]
    ]
    wire = [json.loads(line) for line in (tmp_path / "tools" / "wire.jsonl").read_text().splitlines()]
    listed = {json.dumps(call["request"]["tools"]) for call in wire}
    assert len(listed) == 1 and all(call["raw"] > len(next(iter(listed))) for call in wire)
    sed = STEPS[1][1]
    assert wire[1]["response"] == "good\nLine 15 sets it: raise it."
    assert wire[1]["tool_call"] == {"name": "bash", "arguments": json.dumps({"command": sed})}
    assert wire[-1]["tool_call"] == {"name": "submit", "arguments": "{}"}
    history = wire[2]["request"]["messages"]
    assert history[-3]["tool_calls"][0]["function"]["arguments"] == json.dumps({"command": sed})
    assert history[-2]["role"] == "tool" and history[-1]["role"] == "user"
    assert text.totals("original") == tools.totals("original")
    ours = [r.totals("llm-ide") for r in (text, tools)]
    assert ours[0].calls == ours[1].calls == 6 and ours[0].raw != ours[1].raw and ours[1].output > 0


@pytest.mark.parametrize("flag", [[], ["--action-format", "text"]])
def test_our_own_run_with_tool_calls_replays_in_its_format_or_the_one_asked(
    flag: list[str], demo: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run of ours that acted by tool calls replays as tools without the flag, each reply its own word for word
    (text and call: both sides' outputs equal), and with tags when asked; either way to the same tree."""
    repo, trajectory = demo
    args = ["--repo", str(repo), "-o", str(tmp_path / "a"), "--action-format", "tools"]
    first = cli("replay", str(trajectory), *args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    ran = report_of(tmp_path / "a").run_trajectory
    done = cli("replay", ran, "--repo", str(repo), "--output", str(tmp_path / "b"), *flag, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "b")
    assert (report.exit_status, report.same_as_submission, report.diverged) == ("submitted", True, "")
    assert [step.action for step in report.steps] == [step.action for step in report_of(tmp_path / "a").steps]
    wire = [json.loads(line) for line in (tmp_path / "b" / "wire.jsonl").read_text().splitlines()]
    recorded = [
        (c["response"], c.get("tool_calls", [{}])[0].get("arguments"))
        for c in json.loads(Path(ran).read_text())["model_calls"]
    ]
    if flag:
        assert report.action_format == "text" and all("tool_call" not in call for call in wire)
        assert "<bash>" in wire[1]["response"]
    else:
        assert report.action_format == "tools" and "without the tool list" in done.stdout
        assert [(c["response"], c["tool_call"]["arguments"]) for c in wire] == recorded
        assert report.totals("llm-ide").output == report.totals("original").output


RAISED = MODULE.replace("alpha_value = 1\n", "alpha_value = 10\n").replace("omega_value = 2\n", "omega_value = 20\n")


REWRITE = [
    ("Read the whole module.", "cat m.py", 0, MODULE),
    ("Write it anew, both values raised.", f"cat <<'EOF' > m.py\n{RAISED}EOF", 0, ""),
    ("Note it at the end.", "cat <<'EOF' >> m.py\n# values raised\nEOF", 0, ""),
]


def test_a_file_written_whole_replaces_every_line_billed_at_the_profile_s_prices(tmp_path: Path) -> None:
    """`cat > f <<EOF` rewrites f from the model's memory: the edit replaced each of its lines (an append replaced
    none). The replay bills both agents at the profile's prices and gives them to llm-ide's model, which weighs them."""
    repo = make_repo(tmp_path / "repo")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    for _, command, _, _ in REWRITE[1:]:
        subprocess.run(command, shell=True, cwd=work, check=True)
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", REWRITE, git(work, "diff"))
    out = tmp_path / "out"
    done = cli("replay", str(trajectory), "--repo", str(repo), "--out", str(out), "--profile", "claude55", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(out)
    assert report.same_as_submission and (report.prices.profile, report.prices.cache_write) == ("claude55", 1.25)
    rewrite, append = report.steps[1], report.steps[2]
    for agent in AGENTS:
        whole = rewrite.agents[agent]
        assert (whole.pre_image.total, whole.pre_image.present, whole.context.total) == (
            30,
            30,
            0,
        )  # the cat showed all
        assert append.agents[agent].pre_image.total == 0 and append.edited == ["m.py"]
        for step in report.steps:
            figures = step.agents[agent]
            assert figures.bill == pytest.approx(
                (figures.raw - figures.cached) * 1.25 + figures.cached * 0.05 + figures.output * 5
            )
    config = json.loads(Path(report.run_trajectory).read_text())["info"]["config"]
    assert config["model"]["prices"]["replay"] == {"input": 1.0, "output": 5.0, "cache_read": 0.05, "cache_write": 1.25}
    assert "claude55: uncached × 1.25" in " ".join(done.stdout.split())  # the totals' title says the prices


def test_our_own_trajectory_replays_to_the_same_bill(demo: tuple[Path, Path], tmp_path: Path) -> None:
    """A run of ours replayed on the same checkout asks the same prompts: every figure of both sides is equal."""
    repo, trajectory = demo
    assert (
        cli("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "a"), cwd=tmp_path).returncode == 0
    )
    first = report_of(tmp_path / "a")
    done = cli("replay", first.run_trajectory, "--repo", str(repo), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    second = report_of(tmp_path / "b")
    assert second.format == "llm-ide-1" and second.same_as_submission is True
    ours, theirs = second.totals("llm-ide"), second.totals("original")
    assert ours == theirs == first.totals("llm-ide")


def test_our_own_run_with_an_edit_action_replays_word_for_word(tmp_path: Path) -> None:
    """The demo's run (view, run, `edit`, test, submit) replayed on its base: the edited file is not put changed
    before the first step (the edit writes it), the edit applies, and both sides' every figure is equal."""
    demo = ROOT / "llm_ide" / "demo"
    project = tmp_path / "project"
    shutil.copytree(demo / "project", project)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    base = git(project, "rev-parse", "HEAD").strip()
    config = ["--config", str(demo / "config.yaml")]
    ran = cli("run", "--repo", str(project), "--task-file", str(demo / "task.md"), "--model",
              f"scripted:{demo / 'script.yaml'}", *config, "--output", str(tmp_path / "run"), "--thread-id", "d",
              cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    git(project, "checkout", "-q", ".")
    done = cli("replay", str(tmp_path / "run" / "d.traj.json"), "--repo", str(project), "--commit", base, *config,
               "--out", str(tmp_path / "replay"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(tmp_path / "replay")
    assert report.environment_changes == [] and report.differing_returncodes == []
    assert [step.action for step in report.steps][2].startswith("edit calc/stats.py")
    assert report.totals("llm-ide") == report.totals("original") and report.same_as_submission is True


@pytest.mark.parametrize(
    ("line", "prompt", "present"),
    [
        ("x = 1", "  445\t    x = 1", True),
        ("x = 1", "max = 10", False),
        ("return a  +  b", "    return a + b  # sum", True),
        ("def run(self):", "def run(self, other):", False),
    ],
)
def test_a_line_is_present_inside_a_line_of_the_prompt(line: str, prompt: str, present: bool) -> None:
    assert Text(prompt).holds_line(" ".join(line.split())) is present
    assert occurs("abc", "xabc") is False and occurs("abc", "x.abc(") is True


def test_edits_references_and_matching_on_small_cases() -> None:
    old = "".join(f"line number {n}\n" for n in range(1, 21))
    new = old.replace("line number 10\n", "line number ten\n").replace("line number 11\n", "")
    edit = edit_lines([FileChange("f.py", old, new)])
    assert [(n, text) for _, n, text in edit.removed] == [(10, "line number 10"), (11, "line number 11")]
    assert [n for _, n, _ in edit.context] == [7, 8, 9, 12, 13, 14]
    seen = [Text("12:def compute_total(items):\n  File '/testbed/pkg/core.py', line 88\n")] * 2
    command = "sed -n '88,95p' /testbed/pkg/core.py && grep -n compute_total pkg/other.py | invented_name -n 12"
    expected = ["88", "pkg/core.py", "compute_total", "pkg", "12"]  # pkg/other.py: its known parts
    assert references(command, seen, Text("the task mentions nothing")) == expected
    assert references(command, seen, Text("compute_total is in the task")) == ["88", "pkg/core.py", "pkg", "12"]
    diff = "diff --git a/a.py b/a.py\nindex 1..2 100644\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    new_file = (
        "diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+z\n"
    )
    assert tracked_sections(diff + new_file, {"a.py"}) == tracked_sections(diff.replace("1..2", "3..4"), {"a.py"})


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        ("{{ output.returncode }}: {{ output.output | length }}", "0: 6"),  # the output ended as a shell prints it
        ("{{ ''.__class__ }}{{ output.output }}", "hello\n"),  # sandboxed: no attribute of Python's own
        ("{{ output.returncode + 'x' }}", None),  # a template that fails leaves the side out, the replay goes on
        ("{% for i in range(10**9) %}x{% endfor %}", None),
        ("{{ output", None),
    ],
)
def test_full_history_renders_the_replayed_output_with_the_trajectory_s_own_template(
    template: str, shown: str | None
) -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    messages += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "the original's output"}]
    requests = [Request(1, messages[:2], "a"), Request(2, messages, "b")]
    trajectory = Trajectory(
        "mini-swe-agent-1", "task", [], requests, "", observation_template=template, observed={3: 0}
    )
    calls = full_history_calls(trajectory, [{"returncode": 0, "observation": "hello"}])
    if shown is None:
        assert calls is None
        return
    assert calls is not None and [call.messages for call in calls] == [
        messages[:2],
        [*messages[:3], {"role": "user", "content": shown}],
    ]
    assert [(call.raw, call.cached) for call in calls] == [(5, 0), (6 + len(shown), 5)]
