"""What a memory snapshot holds beyond the code context (the repository's changes, the files named so far, the recent
operations, the history without repeated summaries) and when it is renewed: real commands of a shared trajectory in
its repository, and a scripted single-call session over a big file."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from mini_trajectories import checkout, real_command

from llm_ide.config import load_config
from llm_ide.nodes.snapshot import READ_WHOLE_FOR, ROW
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

INSTANCE = "psf__requests-1142"
POOL = "requests/packages/urllib3/connectionpool.py"
COLLECTIONS = "requests/packages/urllib3/_collections.py"
ARGPARSE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"


def terse(thought: str, action_type: str, verdict: str = "", **params: object) -> str:
    """A single-call reply: the verdict on the previous operation (none at the first step), the thought, the action."""
    body = params["command"] if action_type == "bash" else json.dumps(params) if params else ""
    return f"{verdict}\n" * bool(verdict) + f"{thought}\n<{action_type}>{body}</{action_type}>"


def section(prompt: str, title: str) -> str:
    """The snapshot section `## title…` of a prompt, up to the next section."""
    if f"## {title}" not in prompt:
        return ""
    return prompt.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


GPT = {"input": 1.0, "cache_read": 0.1, "output": 8.0}  # the prices the scripted model's renewals weigh


def run(tmp_path: Path, repo: Path, script: list[str], task: str, **memory: object) -> dict:
    settings = load_config("default", environment={"tools": []}, memory={"unpriced": GPT, **memory})
    result = run_task(
        task,
        model=write_script(tmp_path / "script.yaml", script),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo,
    )
    assert result.exit_status == "submitted"
    return load_trajectory(result.trajectory_path)


def test_a_snapshot_shows_the_changes_and_the_files_named_so_far(
    shared_dir: Path, session_cache: Path, tmp_path: Path
) -> None:
    repo = checkout(shared_dir, INSTANCE, tmp_path / "repo", session_cache)
    commands = [
        real_command(shared_dir, INSTANCE, 'grep -n "strict" requests/packages/urllib3/connectionpool.py'),
        real_command(shared_dir, INSTANCE, "sed -i 's/from collections import MutableMapping/"),  # _collections.py
        real_command(shared_dir, INSTANCE, "cat <<'EOF' > reproduce_issue.py"),  # a scratch script
        real_command(shared_dir, INSTANCE, "sed -i 's/strict=self.strict)//'"),  # connectionpool.py
        f"echo 'see docs/nowhere.py' && ls {repo}/setup.py",
        real_command(shared_dir, INSTANCE, "git checkout requests/packages/urllib3/_collections.py"),
    ]
    script = [terse(f"Step {n}.", "bash", "good" if n else "", command=command) for n, command in enumerate(commands)]
    script.append(terse("Reverted.", "submit", "good"))
    traj = run(tmp_path, repo, script, "Fix the Content-Length header.", snapshot_every=1)
    prompts = [call["prompt"] for call in traj["model_calls"]]
    assert len(prompts) == len(commands) + 1  # one call per step, each with a fresh snapshot
    assert section(prompts[1], "Changes") == ""  # nothing changed yet
    changed = section(prompts[2], "Changes")
    assert f"diff --git a/{COLLECTIONS} b/{COLLECTIONS}\n--- a/{COLLECTIONS}" in changed  # no `index` line
    assert "-from collections import MutableMapping\n+try:\n+    from collections.abc import MutableMapping" in changed
    assert " from threading import Lock" in changed  # the diff's context rows
    after_scratch = section(prompts[3], "Changes")
    assert after_scratch == changed and "reproduce_issue.py" not in after_scratch  # a created file is no change
    both = section(prompts[4], "Changes")
    assert f"diff --git a/{COLLECTIONS}" in both and f"diff --git a/{POOL}" in both and "-" * 3 in both
    reverted = section(prompts[6], "Changes")
    assert f"diff --git a/{POOL}" in reverted and COLLECTIONS not in reverted  # `git checkout` undid that change
    files = section(prompts[5], "Files named so far").strip()
    assert files == f"{POOL}, {COLLECTIONS}, reproduce_issue.py, setup.py"  # first seen first; only existing ones


def argparse_repo(tmp_path: Path) -> Path:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n"})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    return repo


def viewing_session(steps: int) -> list[str]:
    """Single-call replies: 150-line views of argparse.py, each judged good by the next reply, whose reasoning begins
    with what the view showed."""
    script = []
    for step in range(steps):
        start = 1 + step * 150
        thought = f"Lines {start - 150}+ read. Step {step}[1](argparse.py:{start})." if step else "Step 0."
        lines = {"start_line": start, "end_line": start + 149}
        script.append(terse(thought, "view", "good" if step else "", path="argparse.py", **lines))
    script.append(terse("All read.", "submit", "good"))
    return script


def renewals(prompts: list[str]) -> list[int]:
    return [i for i in range(1, len(prompts)) if not prompts[i].startswith(prompts[i - 1])]


def test_the_prompt_grows_until_renewing_pays_and_the_recent_operations_stay_verbatim(tmp_path: Path) -> None:
    repo = argparse_repo(tmp_path)
    memory = {"renew_at_chars": 20_000, "renew_ratio": 2.0, "recent_operations": 2, "context_budget_chars": 2000}
    traj = run(tmp_path, repo, viewing_session(12), "Read argparse.py.", **memory)
    calls = traj["model_calls"]
    prompts, sizes = [c["prompt"] for c in calls], [c["prompt_chars"] for c in calls]
    renewed = renewals(prompts)
    assert renewed and renewed[0] > 2 and sizes[0] < 20_000  # append-only at first
    for i in renewed:  # past renew_at_chars (with the newest view, at most 9k); smaller than the prompt before
        assert sizes[i - 1] + 9_000 > 20_000 and sizes[i] < sizes[i - 1]
    last = prompts[renewed[-1]]
    recent = [line for line in last.splitlines() if line.startswith("### Operation ")]
    step = int(recent[-1].split()[2])
    assert recent[-2:] == [f"### Operation {step - 1}", f"### Operation {step} (latest)"]  # two with observations
    assert last.count("Observation (return code 0):") == 2
    history = section(last, "Operation History")
    assert "Summary:" not in history  # each summary is the first sentence of the next thought, shown below it
    assert f"Thought: Lines {1 + (step - 2) * 150}+ read." in last


def test_without_room_to_gain_the_snapshot_is_kept_until_the_prompt_budget(tmp_path: Path) -> None:
    repo = argparse_repo(tmp_path)
    memory = {"renew_at_chars": 12_000, "renew_ratio": 50.0, "prompt_budget_chars": 60_000}
    traj = run(tmp_path, repo, viewing_session(12), "Read argparse.py.", **memory)
    prompts, sizes = [c["prompt"] for c in traj["model_calls"]], [c["prompt_chars"] for c in traj["model_calls"]]
    renewed = renewals(prompts)
    assert renewed  # forced by the budget, not by the ratio
    assert all(sizes[i - 1] > 0.9 * 60_000 - 15_000 for i in renewed) and max(sizes) <= 60_000
    assert sizes[renewed[0] - 1] > 3 * 12_000


def test_a_verdict_with_its_own_summary_keeps_it_in_the_history(tmp_path: Path) -> None:
    repo = argparse_repo(tmp_path)
    script = viewing_session(4)
    script[2] = script[2].replace("good\n", "good: the usage formatter\n", 1)  # a summary of its own
    script[-1:] = [reflect(False, "read"), act("Done.", "submit")]  # a two-call script's reflection and action
    traj = run(tmp_path, repo, script, "Read.", snapshot_every=1)
    last = traj["model_calls"][-1]["prompt"]
    history = section(last, "Operation History")
    assert "Summary: the usage formatter" in history and history.count("Summary:") == 1
    reply = traj["model_calls"][-1]["response"]  # a two-call script's reflection joined the action after it
    assert reply.startswith("<bad_action>false</bad_action>") and "<action_type>submit</action_type>" in reply
    ops = traj["operations"]
    assert [op["summary"] for op in ops[:3]] == ["Lines 1+ read.", "the usage formatter", "Lines 301+ read."]


def counting_session(steps: int) -> list[str]:
    """A view of 60 lines of argparse.py, then commands whose long outputs hold no code."""
    script = [terse("Step 0.", "view", path="argparse.py", start_line=1, end_line=60)]
    script += [terse(f"Count {n}.", "bash", "good", command=f"seq {n} 2500") for n in range(1, steps)]
    return [*script, terse("Done.", "submit", "good")]


def test_a_renewal_that_keeps_the_base_sends_it_byte_for_byte_and_first(tmp_path: Path) -> None:
    """The outputs hold no code: after a full renewal the base (the view's code among it) stays; each later renewal
    drops the turns since, keeps the base as the provider cached it, and adds what came since (the history)."""
    traj = run(tmp_path, argparse_repo(tmp_path), counting_session(10), "Count.")
    prompts = [call["prompt"] for call in traj["model_calls"]]
    renewed = renewals(prompts)
    kept = [i for i in renewed if "# Since operation" in prompts[i]]
    assert len(renewed) >= 3 and kept == renewed[1:]  # a full renewal, then renewals keeping its base
    full = prompts[renewed[0]]
    base = full[: full.index("### Operation", full.index("## Code Context"))]  # the system part and the base
    assert "     1\t#" in base and "    60\t" in base  # the view's code
    for i in kept:
        since = prompts[i][len(base) :].split(" (latest)\n", 1)[0]  # up to the latest operation's output
        assert prompts[i].startswith(base) and len(os.path.commonprefix([prompts[i], prompts[i - 1]])) >= len(base)
        assert since.startswith("# Since operation") and "## Operation History, continued" in since
        assert "## Code Context" not in since and "    60\t" not in since  # no code came since: nothing repeated
        assert len(since) < len(base) // 2
    step = int(prompts[kept[-1]].split("# Since operation ", 1)[1].split()[0])
    assert step == renewed[0]  # the base is the full renewal's


def test_a_lower_renew_ratio_renews_sooner_and_more_often(tmp_path: Path) -> None:
    """A renewal comes once the re-reads of what it drops have cost `renew_ratio` times its price."""
    found = {}
    for ratio in (1.0, 4.0):
        folder = tmp_path / str(ratio)
        traj = run(folder, argparse_repo(folder), counting_session(10), "Count.", renew_ratio=ratio)
        found[ratio] = renewals([call["prompt"] for call in traj["model_calls"]])
    assert found[1.0][0] < found[4.0][0] and len(found[1.0]) > len(found[4.0]) >= 1


SHAPES = "".join(
    f"def shape_{n}(width, height):\n    area_{n} = width * height * {n}\n    return area_{n} + {n}\n\n\n"
    for n in range(1, 31)
)  # 150 lines, 30 functions, about 2,700 characters


def shapes_session(tmp_path: Path, reads: list[str], counts: int, **memory: object) -> tuple[Path, list[str]]:
    """`reads` of shapes.py (150 lines), then counts whose outputs renew the memory, with a view of argparse.py among
    them that fills a 1,000-character code context: the repository and the prompts."""
    repo = make_git_repo(tmp_path / "repo", {"shapes.py": SHAPES})
    shutil.copyfile(ARGPARSE, repo / "argparse.py")
    script = [terse(f"Read {n}.", "bash", "good" * (n > 0), command=command) for n, command in enumerate(reads)]
    script += [terse(f"Count {n}.", "bash", "good", command=f"seq {n} 2500") for n in range(1, 7)]
    script += [terse("Some argparse.", "view", "good", path="argparse.py", start_line=100, end_line=160)]
    script += [terse(f"Count {n}.", "bash", "good", command=f"seq {n} 2500") for n in range(7, counts + 1)]
    memory = {"context_budget_chars": 1000, **memory}
    traj = run(tmp_path, repo, [*script, terse("Done.", "submit", "good")], "Read shapes.py.", **memory)
    return repo, [call["prompt"] for call in traj["model_calls"]]


@pytest.mark.parametrize(
    ("command", "room", "until"),
    [
        ("cat shapes.py", 16_000, READ_WHOLE_FOR),  # read whole: shown whole for READ_WHOLE_FOR operations
        (f"cat <<'EOF' > shapes.py\n{SHAPES.replace('* 7', '* 70')}EOF", 16_000, 99),  # written whole: while active
        ("cat shapes.py", 0, 0),  # `whole_file_chars: 0`: the code context's budget alone
        ("cat shapes.py", 2_000, 0),  # the file does not fit
    ],
)
def test_a_file_read_or_written_whole_stays_whole_in_the_snapshots(
    command: str, room: int, until: int, tmp_path: Path
) -> None:
    """An agent that read or wrote a file whole may write it anew from memory: the snapshots after it show every line
    of it (beside the code context's budget, which a view of another file fills) while it fits `whole_file_chars`:
    a file read whole for the next operations, one written whole while it stays active."""
    repo, prompts = shapes_session(tmp_path, [command], 13, whole_file_chars=room)
    renewed = renewals(prompts)  # call i renders the memory after operation i - 1
    assert min(renewed) <= READ_WHOLE_FOR < max(renewed)  # renewals while the read is recent, and after
    lines = (repo / "shapes.py").read_text().splitlines()
    for i in renewed:  # a renewal keeping the base keeps what the base showed (the cache holds it)
        rows = {row.split("\t", 1)[1] for row in prompts[i].splitlines() if ROW.match(row) and "\t" in row}
        whole = all(line in rows for line in lines if line)
        assert whole == (i <= until) or (whole and "# Since operation" in prompts[i]), i


@pytest.mark.parametrize(("share", "kept"), [(0.5, True), (0.0, False), (1.0, False)])
def test_a_file_read_through_in_pieces_keeps_what_was_read_in_the_snapshots(
    share: float, kept: bool, tmp_path: Path
) -> None:
    """An agent that read a file range after range (two thirds of it) may write it anew from memory as well: while
    its chunks stay active, the snapshots keep every line it read, beside the code context's budget (which a view of
    another file fills), once they hold `memory.read_through` of the file's lines (0: never)."""
    pieces = [(1, 50), (51, 100)]
    reads = [f"sed -n '{a},{b}p' shapes.py" for a, b in pieces]
    repo, prompts = shapes_session(tmp_path, reads, 11, read_through=share)
    renewed = [i for i in renewals(prompts) if "# Since operation" not in prompts[i]]  # full renewals
    assert renewed and min(renewed) > len(pieces)
    lines = (repo / "shapes.py").read_text().splitlines()
    read = [line for line in lines[:100] if line]
    for i in renewed:
        rows = {row.split("\t", 1)[1] for row in prompts[i].splitlines() if ROW.match(row) and "\t" in row}
        assert all(line in rows for line in read) == kept, i
        assert "    return area_30 + 30" not in rows  # a line never read
