"""A run's inputs checked before anything of a run is imported (its settings, its variants, LangGraph): its id, its
output folder (a file in its place, a JSON file's name, the repository itself), its task, the kind of environment
an image implies; each a UsageError of one line, the same at every door."""

from __future__ import annotations

import re
from pathlib import Path

from llm_ide.environments import KINDS, capabilities
from llm_ide.errors import PreflightError, UsageError

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RUN_ID_MAX = 128  # a file name holds 255 bytes: the id, an attempt's suffix and the longest of a run's own suffixes
IGNORE_ALL = "# made by llm-ide: its runs' files are no part of a repository\n*\n"


def check_run_id(run_id: str) -> None:
    """A thread id that cannot name the run's files (an empty one too) is a usage error."""
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"thread id {run_id!r}: use letters, digits, '.', '_' and '-' (it names the run's files)")
    if len(run_id) > RUN_ID_MAX:
        raise UsageError(
            f"thread id {run_id[:40]}… is {len(run_id)} characters long: "
            f"at most {RUN_ID_MAX} (it names the run's files)"
        )


def check_task(task: str, source: str | None = None) -> None:  # (`source`: where the command line read it)
    if not task.strip():
        raise PreflightError(f"the task is empty{f' ({source})' if source else ''}: say what the agent should do")


def make_output_folder(path: Path) -> None:
    """`path` and its missing parents, created; the topmost one created holds a .gitignore of everything in it (as
    pytest's cache does), so that runs' files never enter a repository they are made in: its patches, `git status`."""
    missing = next((folder for folder in reversed([path, *path.parents]) if not folder.exists()), None)
    path.mkdir(parents=True, exist_ok=True)
    if missing is not None:
        (missing / ".gitignore").write_text(IGNORE_ALL, encoding="utf-8")


def refuse_a_file(folder: Path, option: str = "output folder") -> None:
    """A file where an output folder (or one of its parents) should be: a usage error of one line."""
    if blocker := next((path for path in [folder, *folder.parents] if path.is_file()), None):
        said = "it" if blocker == folder else blocker
        raise UsageError(f"{option} {folder}: {said} is a file, not a folder: give a folder (it is created if missing)")


def refuse_a_json_name(folder: Path, run_id: str, option: str) -> None:
    """A run's output folder named as a JSON file (mini-swe-agent's `-o` is its trajectory file) is a usage error, where
    it became a folder of that name; an existing folder of that name is taken."""
    if folder.suffix == ".json" and not folder.is_dir():
        raise UsageError(
            f"{option} {folder}: {option} is the run's output folder (mini-swe-agent's -o is the trajectory file); "
            f"give a folder: the trajectory is <folder>/{run_id}.traj.json"
        )


def check_output_folder(output_dir: Path, repo: Path | None, option: str = "the run") -> None:
    """The run's folder may be in the repository (its commands and its patch never see it) or outside, never be it
    (`option`: what the door that was used calls it: --output, `output_dir`, the graph input's `output`)."""
    if repo is not None and Path(output_dir).resolve() == Path(repo).resolve():
        raise UsageError(
            f"the output folder is the repository itself ({Path(repo).resolve()}): the agent's commands would see "
            f"and change the run's own files; give {option} a folder inside or outside it"
        )


def prepare_output(output_dir: Path, run_id: str) -> Path:
    """The run's output folder, created; a thread id that cannot name its files is a usage error."""
    check_run_id(run_id)
    refuse_a_file(output_dir)
    try:
        make_output_folder(output_dir)
    except OSError as error:
        raise UsageError(f"output folder {output_dir}: cannot create it ({error.strerror})") from None
    return output_dir


def imaged_environment(
    environment: str | None, image: str | None, names: tuple[str, str] = ("`image`", "`environment`")
) -> str | None:
    """The kind of environment of a run given an image: the one that runs from an image, implied when no kind is
    given; a kind that runs in place (where the image would be ignored) is a UsageError. `names`: the door's."""
    if image is None:
        return environment
    imaged = next(name for name, kind in KINDS.items() if kind.capabilities.image)
    if environment is not None and not capabilities(environment).image:
        said = f"{names[0]} runs the task in a {imaged} container"
        raise UsageError(f"{said}: it cannot go with {names[1]} {environment}")
    return imaged
