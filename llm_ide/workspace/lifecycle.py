"""A run's workspace across faults: the environment opened (a killed run's leftovers reaped, the base commit kept out
of the agent's reach, the repository's future removed, a resumed run's worktree put back as its last snapshot), and
the run's patch at the end (the last snapshot when the environment is gone); putback.py: before a command runs again."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.environments import make_environment
from llm_ide.environments.base import Environment
from llm_ide.environments.scratch import reap_leftovers, sweep_temp_folders
from llm_ide.errors import EnvironmentFailure, ExitStatus, RepositoryLost, ending
from llm_ide.settings import CoreSettings
from llm_ide.workspace.history import hide_future
from llm_ide.workspace.patch import PatchError, extract_patch, keep_base
from llm_ide.workspace.putback import pristine, put_back

log = logging.getLogger("llm_ide.run")


def base_commit(env: Environment) -> str | None:
    returncode, output = env.run_trusted("git rev-parse --verify HEAD", 60)  # ours: outside the sandbox
    return output.decode(errors="replace").strip() if returncode == 0 else None


def baseline_notes(env: Environment, base: str) -> list[str]:
    """What a new run takes as its baseline, and a warning when the repository has changes that are not in it (they
    would be part of the patch, which is the working tree against the base commit)."""
    note = f"baseline: commit {base[:12]} (HEAD); the patch is the working tree's change against it"
    returncode, output = env.run_trusted("git status --porcelain -unormal --ignore-submodules=dirty", 60)
    paths = [line[3:] for line in output.decode(errors="replace").splitlines() if line[3:]] if returncode == 0 else []
    if not paths:
        return [note]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return [
        note,
        f"warning: the repository has uncommitted changes ({shown}): they are not in the baseline, so the patch "
        "will hold them too; commit or stash them first for a patch of the run's own change",
    ]


def open_environment(
    settings: CoreSettings,
    repo: Path | None,
    run_id: str,
    image: str | None,
    output_dir: Path,
    base: str | None,
    snapshot: str | None,
    say: Callable[[str], None],
) -> tuple[Environment, str | None]:
    """The run's environment, ready for the agent's first command, and the base commit (None: not a git
    repository). `snapshot`: a resumed run's last worktree snapshot, put back in a fresh checkout (a new container,
    a checkout on another node); a checkout that kept its files is left as it is."""
    leftovers = output_dir / f"{run_id}.leftovers.json"
    if reaped := reap_leftovers(leftovers):
        log.info("%s", reaped)
        say(reaped)
    if swept := sweep_temp_folders():
        log.info("removed %d temp folders of llm-ide runs that were killed", swept)
    env = make_environment(settings.environment, repo, run_id, image, leftovers=leftovers, output_dir=output_dir)
    try:  # (failed or interrupted from here on, even as its notes are told: it is closed)
        for note in env.notes:
            log.info("%s", note)
            say(note)
        base = base or base_commit(env)
        if base is None and settings.environment.require_repository:
            raise EnvironmentFailure(f"{env.workdir} is not a git repository with a commit (image: {image or 'none'})")
        if base is None:
            log.warning("%s is not a git repository with a commit: no patch will be extracted", env.workdir)
            say("not a git repository with a commit: no patch will be extracted")
            return env, None
        tree = keep_base(env, base)  # out of the agent's reach before its first command
        if removed := hide_future(env, base, settings.environment.scrub_history):
            log.info("%s", removed)
            say(removed)
        fresh = env.capabilities.ephemeral or pristine(tree, settings.patch)
        if snapshot and fresh and (count := put_back(tree, snapshot, settings.patch)):
            log.info("the worktree put back as the last completed step left it (%d files)", count)
            say(f"the worktree put back as the last completed step left it ({count} file{'s' * (count != 1)})")
        return env, base
    except BaseException:
        env.close()
        raise


def final_patch(env: Environment, base: str | None, settings: CoreSettings, values: dict[str, Any]) -> str:
    """The run's patch from the environment, else (the container gone) the last worktree snapshot; else PatchError."""
    if base is None:
        return ""
    try:
        return extract_patch(env, base, settings.patch, check=True)
    except RepositoryLost as error:  # the run ends with it; its work as the last snapshot holds it
        error.patch = values.get("worktree_patch", "")
        raise
    except Exception as error:
        if "worktree_patch" not in values:
            raise PatchError(str(error)) from None
        log.warning("patch extraction failed (%s): the patch is the last completed step's worktree snapshot", error)
        return values["worktree_patch"]


def latest_worktree_patch(snapshot: Any) -> str | None:
    """The newest completed step's worktree snapshot, writes saved after the last checkpoint row counted (or None)."""
    for task in snapshot.tasks:
        if isinstance(task.result, dict) and "worktree_patch" in task.result:
            return task.result["worktree_patch"]
    return (snapshot.values or {}).get("worktree_patch")


def recover_submission(
    values: dict[str, Any], settings: CoreSettings, repo: Path | None, run_id: str, image: str | None, info: dict
) -> tuple[ExitStatus, str]:
    """A finished run whose trajectory lost its submission (killed before it was saved, or truncated): the patch
    again from the worktree snapshot or the repository; an `error` when it cannot be had."""
    status = ExitStatus(values["exit_status"])
    if "worktree_patch" in values:
        return status, values["worktree_patch"]
    base = values.get("base_commit")
    if not base:
        return status, ""
    env = None
    try:
        env = make_environment(settings.environment, repo, run_id, image)
        return status, extract_patch(env, base, settings.patch)
    except Exception as error:
        info["error"] = f"the finished run's patch could not be recovered: {error}"
        log.error("%s", info["error"])
        return ending(error)[0], ""
    finally:
        if env is not None:
            env.close()


def previous_submission(path: Path, status: str) -> str | None:
    """The submission the trajectory saved with the run's final status; None when it did not save one."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))["info"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(info, dict) or info.get("exit_status") != status or not isinstance(info.get("submission"), str):
        return None
    return info["submission"]
