"""The lines an edit changes enter the code context whatever made the edit, and files the agent creates do not push
out the code under repair: real commands of the shared trajectories, run by the agent (scripted model) in their
repositories at the base commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from mini_trajectories import checkout, real_command
from test_agent import config

from llm_ide.codeview.changes import _differences, changed_lines
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.workspace.patch import extract_patch


def run_commands(tmp_path: Path, repo: Path, commands: list[str], budget: int) -> tuple[dict, list[str]]:
    """The agent runs `commands` one per step (a fresh memory snapshot in every prompt), then submits: its trajectory
    and the code context section of each act prompt."""
    script = []
    for step, command in enumerate(commands):
        script += [act(f"Step {step}.", "bash", command=command), reflect(False, f"ran step {step}")]
    script.append(act("Done.", "submit"))
    result = run_task(
        "Fix the skip location.",
        model=write_script(tmp_path / "script.yaml", script),
        settings=config().merged({"memory": {"snapshot_every": 1, "context_budget_chars": budget}}),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo,
    )
    assert result.exit_status == "submitted"
    traj = load_trajectory(result.trajectory_path)
    prompts = [call["prompt"] for call in traj["model_calls"] if call["kind"] == "act"]
    return traj, [prompt.split("## Code Context", 1)[1].split("\n### Operation", 1)[0] for prompt in prompts]


def rows(text: str, numbers: range) -> list[str]:
    lines = text.split("\n")
    return [f"{number:>6}\t{lines[number - 1]}" for number in numbers]


def test_edits_by_python_heredoc_sed_and_patch_are_in_the_code_context_after(
    shared_dir: Path, session_cache: Path, tmp_path: Path
) -> None:
    instance = "pytest-dev__pytest-7432"
    repo = checkout(shared_dir, instance, tmp_path / "repo", session_cache)
    skipping = repo / "src/_pytest/skipping.py"
    commands = [
        real_command(shared_dir, instance, "nl -ba src/_pytest/skipping.py | sed -n '260,300p'"),
        real_command(shared_dir, instance, "cat <<'EOF' > fix_skipping.py"),  # a scratch script
        real_command(shared_dir, instance, "python3 fix_skipping.py"),  # moves a block of skipping.py
        real_command(shared_dir, instance, "cat <<'EOF' >> testing/test_skipping.py"),  # a heredoc onto a tracked file
        real_command(shared_dir, instance, 'sed -i "282i'),  # inserts a debug print
        real_command(shared_dir, instance, "sed -i '/DEBUG: item.reportinfo()/d'"),  # deletes it
        "git stash",
        "git stash show -p | patch -p1",
    ]
    traj, contexts = run_commands(tmp_path, repo, commands, budget=3000)

    base = subprocess.run(["git", "show", "HEAD:src/_pytest/skipping.py"], cwd=repo, capture_output=True, text=True)
    viewed = rows(base.stdout, range(260, 301))
    assert all(row in contexts[1] for row in viewed)
    assert "   259\t" not in contexts[1] and "   301\t" not in contexts[1]  # (before: lines 1-200)
    # the script moved a block up: inserted at 273-284, removed after 305; changed lines and 3 around each
    fixed = skipping.read_text()
    moved = rows(fixed, range(270, 288)) + rows(fixed, range(302, 310))
    assert all(row in contexts[3] for row in moved)
    appended = rows((repo / "testing/test_skipping.py").read_text(), range(1205, 1224))  # 1208-1223, 3 lines before
    assert all(row in contexts[4] for row in appended)
    assert "   282\t        print(f'DEBUG: item.reportinfo()={item.reportinfo()}')" in contexts[5]
    assert all(row in contexts[6] for row in rows(fixed, range(279, 286)))  # around the gap the deletion left
    assert "DEBUG" not in contexts[6]
    assert all(row in contexts[8] for row in moved)  # put back by `git stash`, again by `patch`

    chunks = {(c["file_path"], c["function"]): c for c in traj["code_context"]}
    makereport = chunks[("src/_pytest/skipping.py", "pytest_runtest_makereport")]
    assert makereport["activity"]["accessed"] == [1, 0, 1, 0, 1, 1, 1, 1, 0]
    assert [c["created"] for c in traj["code_context"] if c["file_path"] == "fix_skipping.py"] == [True]
    assert not any(c["created"] for c in traj["code_context"] if c["file_path"] != "fix_skipping.py")
    assert chunks[("testing/test_skipping.py", "test_skip_location_with_runxfail")]["lines"] == list(range(1209, 1224))


def test_a_created_scratch_file_does_not_evict_the_code_under_repair(
    shared_dir: Path, session_cache: Path, tmp_path: Path
) -> None:
    instance = "psf__requests-1766"
    repo = checkout(shared_dir, instance, tmp_path / "repo", session_cache)
    commands = [
        real_command(shared_dir, instance, "nl -ba requests/auth.py | sed -n '130,160p'"),
        real_command(shared_dir, instance, "cat <<'EOF' > reproduce_issue.py"),
        real_command(shared_dir, instance, "sed -i 's/qop=auth/qop=\"auth\"/'"),
        real_command(shared_dir, instance, "python3 reproduce_issue.py"),
        real_command(shared_dir, instance, 'grep "qop" requests/auth.py'),
    ]
    traj, contexts = run_commands(tmp_path, repo, commands, budget=1800)
    handle_401 = rows((repo / "requests/auth.py").read_text(), range(151, 161))  # viewed at step 0, the oldest
    script = "### File: `reproduce_issue.py`\n     1\tfrom requests.auth import HTTPDigestAuth"
    assert script in contexts[2] and all(row in contexts[2] for row in handle_401)  # just written: shown beside
    # the script was used more recently than handle_401, but a created file goes first when the budget is tight
    assert script not in contexts[3] and all(row in contexts[3] for row in handle_401)
    assert '   147\t            base += \', qop="auth", nc=%s, cnonce="%s"\' % (ncvalue, cnonce)' in contexts[3]
    assert script in contexts[4]  # just run: shown again
    assert script not in contexts[5] and "    72\t        qop = self.chal.get('qop')" in contexts[5]  # a grep hit
    created = {c["file_path"]: c["created"] for c in traj["code_context"]}
    assert created["reproduce_issue.py"] and not created["requests/auth.py"]


def test_changed_lines_between_worktree_snapshots(shared_dir: Path, session_cache: Path, tmp_path: Path) -> None:
    repo = checkout(shared_dir, "psf__requests-1921", tmp_path / "repo", session_cache)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    settings = load_config("default").patch
    before = extract_patch(env, base, settings)
    steps = [
        (
            real_command(shared_dir, "psf__requests-1921", "sed -i '58,60c\\    for (k, v) in list("),
            {"requests/sessions.py": ([58], False)},
        ),  # fmt: skip
        ("printf 'import requests\\nprint(1)\\n' > scratch.py", {"scratch.py": ([1, 2], True)}),
        ("printf 'print(2)\\n' >> scratch.py", {"scratch.py": ([3], True)}),
        ("sed -i '/^import os$/d' requests/sessions.py", {"requests/sessions.py": ([10, 11], False)}),  # the gap
        ("git checkout requests/sessions.py", {"requests/sessions.py": ([11, 58], False)}),  # both put back
        ("rm scratch.py", {}),
        ("cat requests/models.py > /dev/null", {}),
    ]
    for command, expected in steps:
        subprocess.run(command, shell=True, cwd=repo, check=True)
        after = extract_patch(env, base, settings)
        assert {path: (sorted(lines), new) for path, (lines, new) in changed_lines(before, after).items()} == expected
        before = after


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        ([], [], set()),
        ([1, 2, 3], [1, 2, 3], set()),
        ([], ["a", "b"], {0, 1}),
        ([1, 2], [], {-1, 0}),
        ([1, 2, 3], [1, "x", 3], {1}),
        ([1, 2, 3], [1, 3], {0, 1}),
        ([1, 2], ["x", 1, 2, "y"], {0, 3}),
        (["a", "a"], ["a", "a", "a"], {2}),  # the shared head and tail must not overlap
        (["a", "a", "a"], ["a"], {0, 1}),
    ],
)
def test_differences_marks_what_is_new_and_both_sides_of_a_removal(
    previous: list[int | str], current: list[int | str], expected: set[int]
) -> None:
    assert _differences(previous, current) == expected


PERL = r"""perl -0pi -e \
  's/(\n        if "\." in name:)/\n        if not name:\n            raise ValueError("empty")$1/' \
  src/flask/blueprints.py"""
PYTHON = """python3 - <<'EOF'
path = "src/flask/blueprints.py"
text = open(path).read().replace('ValueError("empty")', 'ValueError("\\'name\\' may not be empty.")')
open(path, "w").write(text)
EOF"""


def test_edits_of_every_shape_keep_their_lines_and_three_around_in_the_code_context(
    shared_dir: Path, session_cache: Path, tmp_path: Path
) -> None:
    """Whatever changed the file (sed by a pattern address or a range, perl, a Python script, git apply, patch, a
    checkout putting it back), the next prompt shows its changed lines and 3 lines around them as the file has them."""
    instance = "pallets__flask-5014"
    path = "src/flask/blueprints.py"
    steps = [  # (command, the lines then shown, numbered as the file has them after the command)
        (real_command(shared_dir, instance, 'sed -i \'/if "." in name:/i'), range(190, 199)),  # 3 inserted
        (real_command(shared_dir, instance, "sed -i '/if not name:/,+1d'"), range(190, 197)),  # 2 deleted
        (f"git checkout {path}", range(190, 196)),  # the blank line the insertion had left goes
        (PERL, range(190, 198)),
        (f"git diff > fix.patch && git checkout {path}", range(190, 196)),
        ("git apply fix.patch", range(190, 198)),
        (f"git checkout {path}", range(190, 196)),
        ("patch -p1 < fix.patch", range(190, 198)),
        (PYTHON, range(191, 198)),  # one line replaced
    ]
    repo = checkout(shared_dir, instance, tmp_path / "repo", session_cache)
    # the same commands run by hand: the file after each
    twin = checkout(shared_dir, instance, tmp_path / "twin", session_cache)
    after = []
    for command, _ in steps:
        subprocess.run(command, shell=True, cwd=twin, check=True, capture_output=True)
        after.append((twin / path).read_text())
    traj, contexts = run_commands(tmp_path, repo, [command for command, _ in steps], budget=800)
    for number, ((command, lines), text) in enumerate(zip(steps, after, strict=True)):
        assert all(row in contexts[number + 1] for row in rows(text, lines)), (command, contexts[number + 1])
    init = next(c for c in traj["code_context"] if (c["file_path"], c["function"]) == (path, "__init__"))
    assert init["activity"]["accessed"] == [1] * len(steps) + [0]  # every command changed it; the submit did not
    assert set(range(190, 199)) <= set(init["lines"])


def test_a_heredoc_over_an_existing_file_marks_what_it_changed_not_the_whole_file(
    shared_dir: Path, session_cache: Path, tmp_path: Path
) -> None:
    instance = "sympy__sympy-23950"
    repo = checkout(shared_dir, instance, tmp_path / "repo", session_cache)
    rewrite = real_command(shared_dir, instance, "cat <<'EOF' > sympy/sets/contains.py")  # the whole file, 2 lines new
    traj, contexts = run_commands(tmp_path, repo, [rewrite], budget=800)
    text = (repo / "sympy/sets/contains.py").read_text()
    assert "free_symbols:\n            return self.args[1]\n" in text
    assert all(row in contexts[1] for row in rows(text, range(45, 51)))  # lines 48-49 and 3 around (the file ends)
    accessed = {(c["function"], tuple(c["lines"])) for c in traj["code_context"] if c["activity"]["accessed"][0]}
    assert accessed == {("binary_symbols", (45,)), ("", (46,)), ("as_set", (47, 48, 49, 50))}  # not lines 1-44
