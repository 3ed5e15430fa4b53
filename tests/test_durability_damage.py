"""A run's folder damaged under it (a corrupt checkpoint, a broken calls log, a full disk, a read-only mount, the folder
deleted mid-run): one line, nothing saved lost, and the rerun resumes where it can."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from durability_support import (
    RERUN,
    WAITING_STEPS,
    finish,
    killed_mid_run,
    killed_run,
    llm_ide,
    rerun,
    setup_run,
    trajectory,
    wait_for,
)

__all__ = ["killed_mid_run", "killed_run"]  # the killed run, one per worker (durability_support's fixtures)


def corrupt(database: Path, how: str) -> None:
    wal = database.with_name(database.name + "-wal")
    match how:
        case "emptied":
            database.write_bytes(b"")
            wal.unlink(missing_ok=True)
        case "truncated":
            data = database.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
            wal.unlink(missing_ok=True)
            database.write_bytes(data[: len(data) // 3])
        case "wal_lost":
            wal.unlink()
        case "random":
            database.write_bytes(os.urandom(64 * 1024))
            wal.unlink(missing_ok=True)
        case "deleted":
            database.unlink()
            wal.unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["emptied", "truncated", "wal_lost", "random", "deleted"])
def test_corrupt_checkpoint_is_one_line_and_keeps_the_trajectory(
    killed_mid_run: tuple[Path, list[str], bytes], how: str
) -> None:
    folder, args, saved = killed_mid_run
    repo = folder / "repo"
    corrupt(folder / "out" / "T.checkpoint.sqlite", how)
    (repo / "go").touch()
    code, output = rerun(args, folder)
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1 and output.startswith("error:"), output
    assert (folder / "out" / "T.traj.json").read_bytes() == saved
    assert (repo / "trail.txt").read_text() == "one\n"


def test_an_empty_object_line_in_the_calls_log_is_skipped(killed_mid_run: tuple[Path, list[str], bytes]) -> None:
    folder, args, _ = killed_mid_run
    with (folder / "out" / "T.calls.jsonl").open("a") as handle:
        handle.write("{}\n[1, 2]\n")
    (folder / "repo" / "go").touch()
    code, output = rerun(args, folder)
    assert code == 0, output
    traj = trajectory(folder)
    assert [c["index"] for c in traj["model_calls"]] == list(range(3))
    assert traj["operations"][1]["observation"].startswith(RERUN)


def test_full_disk_ends_the_run_in_one_line_and_it_resumes_once_there_is_room(tmp_path: Path, small_disk: Path) -> None:
    steps = [
        act("First.", "bash", command="echo one >> trail.txt"),
        reflect(False, "one"),
        act("Wait.", "bash", command="touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two >> trail.txt"),
        reflect(False, "two"),
        act("Third.", "bash", command="echo three >> trail.txt"),
        reflect(False, "three"),
        act("Done.", "submit"),
    ]
    repo, args = setup_run(tmp_path, steps)
    args[args.index("--output") + 1] = str(small_disk / "out")
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    with pytest.raises(OSError), (small_disk / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1, output
    assert "Traceback" not in output and ("No space left on device" in output or "disk is full" in output), output
    saved = json.loads((small_disk / "out" / "T.traj.json").read_text())
    assert saved["info"]["exit_status"] in (None, "error")
    (small_disk / "filler").unlink()
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = json.loads((small_disk / "out" / "T.traj.json").read_text())
    assert [o["thought"] for o in traj["operations"]] == ["First.", "Wait.", "Third.", "Done."]
    assert (repo / "trail.txt").read_text() == "one\ntwo\nthree\n"


def test_read_only_run_folder_is_one_line_and_keeps_everything(killed_mid_run: tuple[Path, list[str], bytes]) -> None:
    """A checkpoint (and trajectory) on a read-only mount: one line, nothing changed (a read-only bind mount holds
    even for root, unlike file modes)."""
    folder, args, saved = killed_mid_run
    out = folder / "out"
    if subprocess.run(["mount", "--bind", str(out), str(out)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount (needs root)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(out)], check=True, capture_output=True)
        (folder / "repo" / "go").touch()
        code, output = rerun(args, folder)
    finally:
        subprocess.run(["umount", str(out)], capture_output=True)
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1 and output.startswith("error:"), output
    assert (out / "T.traj.json").read_bytes() == saved


def test_output_folder_deleted_mid_run_is_one_line_and_the_rerun_resumes(tmp_path: Path) -> None:
    """The folder (checkpoint database included) is deleted while the second command runs: the run ends
    `interrupted` with one line, the folder recreated with what the checkpoint holds; the rerun finishes the run with
    each command's effect once."""
    repo, args = setup_run(tmp_path, WAITING_STEPS)
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    shutil.rmtree(tmp_path / "out")
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1, output
    assert "Traceback" not in output and "Error" not in output
    said = " ".join(output.split())  # the console wraps long lines
    assert said.count(f"the output folder {tmp_path / 'out'} was deleted while the run ran: it is recreated") == 1
    saved = trajectory(tmp_path)
    assert saved["info"]["exit_status"] == "interrupted" and saved["info"]["n_operations"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".gitignore",
        "T.calls.jsonl.gz",
        "T.checkpoint.sqlite",
        "T.patch",
        "T.traj.json",
    ]  # fmt: skip  (recreated as a new output folder is: ignored by git)
    # the scripted model's place in its script went with the folder: the rerun's model answers from where the run is
    write_script(tmp_path / "script.yaml", [reflect(False, "two"), act("Done.", "submit")])
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = trajectory(tmp_path)
    assert [o["thought"] for o in traj["operations"]] == ["First.", "Wait.", "Done."]
    assert [c["index"] for c in traj["model_calls"]] == list(range(3))
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"


def test_a_run_whose_folder_was_deleted_says_the_command_that_resumes_it(tmp_path: Path) -> None:
    """A run given no --thread-id (its id made from the time) said "run the same command again to resume": that
    command starts a new run under a new id. The command it prints resumes it."""
    repo, args = setup_run(tmp_path, WAITING_STEPS)
    args = args[: args.index("--thread-id")] + args[args.index("--thread-id") + 2 :]
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    shutil.rmtree(tmp_path / "out")
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1 and "same command" not in output, output
    said = " ".join(output.split())
    recreated = "it is recreated with the run's checkpoint, calls and trajectory, and the run can resume from them"
    assert f"was deleted while the run ran: {recreated}" in said, output
    printed = output.splitlines()[-1]
    assert printed.startswith("llm-ide run ") and "--thread-id run-" in printed, output
    write_script(tmp_path / "script.yaml", [reflect(False, "two"), act("Done.", "submit")])
    code, again = rerun(shlex.split(printed)[1:], tmp_path)
    assert code == 0 and "submitted" in again, again
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"
