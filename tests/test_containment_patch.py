"""The run's patch and record against what its commands do (issue 10 §3, issue 32 §6): a patch that survives a deleted
`.git` and gives non-UTF-8 files' bytes, and a run whose `.git` or output folder a command removed, replaced or locked
ends saying so in one line, its work kept."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, base_image_client, git, make_git_repo
from in_process import invoke

from llm_ide.codeview.changes import tracked_diff
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.errors import EnvironmentFailure
from llm_ide.run.single import run_task
from llm_ide.workspace.patch import extract_patch, keep_base


@pytest.mark.parametrize("sabotage", ["rm -rf .git", "rm -rf .git && git init -q && echo junk > .git/HEAD"])
def test_the_patch_survives_a_deleted_git_directory(tmp_path: Path, sabotage: str) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", "b.py": "gone\n"})
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    base = git(repo, "rev-parse", "HEAD").strip()
    keep_base(env, base)
    (repo / "a.py").write_text("x = 2\n")
    (repo / "b.py").unlink()
    (repo / "new.py").write_text("y = 1\n")
    settings = load_config("default").patch
    before = extract_patch(env, base, settings)
    assert extract_patch(env, base, settings, check=True) == before and "+y = 1" in before  # checked in the same call
    with contextlib.suppress(EnvironmentFailure):  # a deleted .git is said at once; one made again may reuse its inode
        env.execute(sabotage)
    with pytest.raises(EnvironmentFailure, match="its base commit [0-9a-f]{12} is gone from it"):
        extract_patch(env, base, settings, check=True)  # what each snapshot and the end of a run check
    patch = extract_patch(env, base, settings)
    assert patch == before
    assert "-x = 1\n+x = 2\n" in patch
    assert "deleted file mode" in patch and "+y = 1" in patch
    assert ".git" not in patch
    env.close()


NOT_UTF8 = {"latin.py": "# café\nname = 'José'\n", 'odd "name" [1].py': "s = 'Ä'\n"}  # as Latin-1 bytes


@pytest.mark.parametrize("kind", ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])])
def test_a_patch_of_non_utf8_files_applies_to_the_base_and_gives_their_bytes(tmp_path: Path, kind: str) -> None:
    """A Latin-1 file's changed lines came out with U+FFFD for its bytes (the patch is text: JSON, checkpoints), so
    the patch did not apply to the base. Now such a file's change is a binary patch (ASCII), the others' stay text."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    for name, text in NOT_UTF8.items():
        (repo / name).write_bytes(text.encode("latin-1"))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "latin-1")
    base = git(repo, "rev-parse", "HEAD").strip()
    subprocess.run(["git", "clone", "-q", str(repo), str(tmp_path / "base")], check=True)
    if kind == "docker":
        base_image_client()  # (skips without it)
    config = load_config("default", environment={"type": kind, "tools": [], "image": BASE_IMAGE})
    with make_environment(config.environment, repo, f"test-{os.getpid()}-latin") as env:
        keep_base(env, base)
        env.execute("sed -i 's/Jos/Joe/; s/s = /t = /' *.py && echo x = 2 > a.py")
        wanted = {name: data for name in [*NOT_UTF8, "a.py"] if (data := env.read_files([name])[name]) is not None}
        patch = extract_patch(env, base, config.patch)
    assert patch.isascii() and patch.count("GIT binary patch") == 2 and "-x = 1\n+x = 2\n" in patch
    (tmp_path / "run.patch").write_text(patch)
    git(tmp_path / "base", "apply", str(tmp_path / "run.patch"))
    assert {name: (tmp_path / "base" / name).read_bytes() for name in wanted} == {
        name: snapshot.data for name, snapshot in wanted.items()
    }
    assert wanted["latin.py"].data == "# café\nname = 'Joeé'\n".encode("latin-1")
    shown = tracked_diff(patch)  # the prompt's changes: a binary section's header alone, not its base85 lines
    assert shown.count("GIT binary patch") == 2 and "\nliteral " not in shown and "\ndelta " not in shown
    assert "\n+x = 2" in shown and "\nliteral " in patch


@pytest.mark.slow
def test_patch_extraction_works_with_6000_new_files(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    folder = repo / "generated" / ("deeply_nested_directory_name_" * 3)
    folder.mkdir(parents=True)
    for index in range(6000):
        (folder / f"module_with_a_long_name_{index:05d}.py").write_text(f"value = {index}\n")
    (folder / "artefact.pyc").write_bytes(b"\x00")
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    patch = extract_patch(env, git(repo, "rev-parse", "HEAD").strip(), load_config("default").patch)
    assert patch.count("diff --git") == 6000
    assert "+value = 5999" in patch and "artefact.pyc" not in patch
    env.close()


def test_a_submitted_run_whose_patch_cannot_be_extracted_is_an_error(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = load_config("default", environment={"tools": []})
    broken = config.patch.model_copy(update={"artefacts": None})  # makes the extraction fail after the submit
    config = config.model_copy(update={"patch": broken})
    script = [act("Add.", "create", path="b.py", content="y = 1\n"), reflect(False, "Added."), act("Done.", "submit")]
    model = write_script(tmp_path / "script.yaml", script)
    result = run_task("t", model=model, settings=config, output_dir=tmp_path / "out", run_id="p", repo=repo)
    assert result.exit_status == "error" and "patch extraction failed" in result.error


@pytest.mark.parametrize(
    ("who", "sabotage", "sandbox"),
    [
        ("command", "rm -rf .git", "bwrap"),
        ("command", "rm -rf .git && git init -q", "bwrap"),
        ("command", 'rm -rf "$PWD"', "bwrap"),
        ("command", 'rm -rf "$PWD"', "none"),
        ("command", "cd .. && mv repo moved", "none"),
        pytest.param("command", "chmod 0 .", "none", marks=pytest.mark.skipif(os.getuid() == 0, reason="root enters")),
        ("reproduction script", "", "bwrap"),
    ],
)
def test_a_run_whose_git_goes_ends_with_environment_error_and_keeps_its_work(
    tmp_path: Path, who: str, sabotage: str, sandbox: str
) -> None:
    """Issue 32 §6: a reproduction script deleted the user's `.git` (a local run works in place) and the run still
    ended `submitted`, nothing said. Now the run ends `environment_error` with a line saying it, and its patch (the
    last worktree snapshot it holds: the edit before the loss) is written in the output folder. The whole repository
    removed or moved away (unsandboxed, where a command can): the same, not `error` with the patch extraction's
    FileNotFoundError. Its line is the first cause (the step's), not the patch extraction's failing after it."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    steps = [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"), reflect(False, "Edited.")]
    if who == "command":
        steps += [act("Break it.", "bash", command=f"echo 'y = 1' > b.py; {sabotage}"), reflect(False, "Broke.")]
    steps.append(act("Done.", "submit"))
    (tmp_path / "reproduce.sh").write_text("if grep -q 'x = 2' a.py; then rm -rf .git; fi; echo checked\n")
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], sandbox: {sandbox}}}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", write_script(tmp_path / "s.yaml", steps)]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "g"]
    args += ["--reproduction", str(tmp_path / "reproduce.sh")] if who != "command" else []
    done = invoke(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "environment_error after" in done.stdout
    assert "was deleted" in done.stderr and "the patch kept is the run's last worktree snapshot" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "Errno" not in done.stderr
    trajectory = json.loads((tmp_path / "out" / "g.traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "environment_error"
    error = trajectory["info"]["error"]
    if who == "command":  # the step's failure ended it: its line first, the patch extraction's failing after beside it
        first = trajectory["operations"][-1]["observation"].removeprefix("Environment failure: ")
        assert error.startswith(first) and "patch extraction failed" in error and error in done.stderr, error
    patch = (tmp_path / "out" / "g.patch").read_text()
    assert patch == trajectory["info"]["submission"] and "-x = 1\n+x = 2\n" in patch and "b.py" not in patch


def edited_then_broken(tmp_path: Path, command: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """An unsandboxed run (thread g, its folder tmp_path/out) that edits a.py, then runs `command`."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    steps = [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"), reflect(False, "Edited.")]
    steps += [act("Break it.", "bash", command=command), reflect(False, "Broke.")]
    (tmp_path / "c.yaml").write_text("environment: {tools: [], sandbox: none}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", write_script(tmp_path / "s.yaml", steps)]
    return repo, invoke(
        *args, "--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "g"
    )


def test_a_command_putting_a_file_in_place_of_the_run_folder_ends_the_run_in_one_line(tmp_path: Path) -> None:
    """Unsandboxed, a command replaced the run's folder with a file: the folder's recreation at the end raised
    FileExistsError (then the patch's write NotADirectoryError), a traceback in place of why the run ended. Now one
    line says the folder is lost and cannot be recreated; the patch is still printed."""
    repo, done = edited_then_broken(tmp_path, "rm -rf ../out && echo > ../out")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    lost = f"the output folder {tmp_path / 'out'} was deleted or replaced while the run ran and cannot be recreated"
    assert f"{lost} (File exists)" in " ".join(done.stderr.split()) and "+x = 2" in done.stdout


def test_a_run_whose_folder_cannot_be_recreated_says_it_cannot_go_on_and_what_starts_it_over(tmp_path: Path) -> None:
    """Its thread went with its folder, yet the run said "the run goes on where it stopped (interrupted) with:" and a
    command that could not: `out` a file, then, removed, a new thread. It says what the command does: start over."""
    repo, done = edited_then_broken(tmp_path, "rm -rf ../out && echo > ../out")
    said = " ".join(done.stderr.split())
    trajectory = tmp_path / "out" / "g.traj.json"  # its line said this file, which is not there
    assert f"trajectory: none, it could not be written ({trajectory})" in " ".join(done.stdout.split()), done.stdout
    assert (
        "goes on where it stopped" not in said
        and (
            f"the run cannot go on where it stopped: its thread went with {tmp_path / 'out'}; the same command starts "
            "the task over once that folder can be made (or with another --output)"
        )
        in said
    ), done.stderr
    (tmp_path / "out").unlink()
    args = [
        "run",
        "--repo",
        str(repo),
        "--task",
        "t",
        "--model",
        write_script(tmp_path / "s.yaml", [act("Done.", "submit")]),
    ]
    again = invoke(*args, "-c", str(tmp_path / "c.yaml"), "-o", str(tmp_path / "out"), "--thread-id", "g")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((tmp_path / "out" / "g.traj.json").read_text())["info"]["n_operations"] == 1


def test_a_command_removing_both_git_and_the_run_folder_says_the_first_cause_first(tmp_path: Path) -> None:
    """Unsandboxed, `rm -rf ../out .git`: the step ended the run on the lost `.git`, then the next write found the run's
    folder gone, and the line said only that the folder was deleted. Now the `.git` loss comes first, the folder's
    beside it."""
    repo, done = edited_then_broken(tmp_path, "rm -rf ../out .git")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    error = json.loads((tmp_path / "out" / "g.traj.json").read_text())["info"]["error"]
    assert error.startswith(f"the repository's .git ({repo / '.git'}) was deleted or replaced by a command"), error
    assert f"(then the output folder {tmp_path / 'out'} was deleted while the run ran" in error
    assert error in " ".join(done.stderr.split())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_run_whose_folder_a_command_made_read_only_does_not_say_it_succeeded(tmp_path: Path) -> None:
    """Unsandboxed, a command made the run's folder read-only (`chmod 555 ../out`): its trajectory and patch could not
    be written, yet the run said `submitted` and exited 0. Now it ends resumable (the same command, the folder
    writable again, saves its record), its line saying why, exit 1; the patch still printed."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    steps = [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"), reflect(False, "Edited.")]
    steps += [act("Lock.", "bash", command="chmod 555 ../out"), reflect(False, "Locked."), act("Done.", "submit")]
    (tmp_path / "c.yaml").write_text("environment: {tools: [], sandbox: none}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", write_script(tmp_path / "s.yaml", steps)]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "g"]
    done = invoke(*args)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "interrupted after" in done.stdout and "+x = 2" in done.stdout
    assert "the trajectory could not be saved" in done.stderr and "Permission denied" in done.stderr
    (tmp_path / "out").chmod(0o755)
    again = invoke(*args)
    assert again.returncode == 0 and "submitted after" in again.stdout, again.stdout + again.stderr
    trajectory = json.loads((tmp_path / "out" / "g.traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "submitted" and "+x = 2" in trajectory["info"]["submission"]
