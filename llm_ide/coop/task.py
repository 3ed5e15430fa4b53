"""A CooperBench task folder (`dataset/{repo}_task/task{id}/`), validated, and the repository it needs."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel

from llm_ide.environments.views import UNHOOKED
from llm_ide.errors import UsageError

FEATURE_FILES = ("feature.md", "feature.patch", "tests.patch")
TASK_FILES = ("setup.sh", "run_tests.sh")


class CoopError(UsageError):
    """A malformed task folder, a missing repository source or a pair that does not exist: one line for the user."""


class Feature(BaseModel):
    number: int
    folder: Path

    @property
    def description(self) -> str:
        return (self.folder / "feature.md").read_text(encoding="utf-8")

    @property
    def patch(self) -> Path:
        return self.folder / "feature.patch"

    @property
    def tests(self) -> Path:
        return self.folder / "tests.patch"


class CoopTask(BaseModel):
    folder: Path
    repo_name: str
    task_id: int
    base_commit: str
    features: dict[int, Feature]

    @property
    def name(self) -> str:
        return f"{self.repo_name}_task/task{self.task_id}"

    def feature(self, number: int) -> Feature:
        if number not in self.features:
            raise CoopError(f"{self.folder}: no feature{number} (features: {', '.join(map(str, self.features))})")
        return self.features[number]


def load_task(folder: Path) -> CoopTask:
    folder = folder.resolve()
    match = re.fullmatch(r"task(\d+)", folder.name)
    repo = re.fullmatch(r"(.+)_task", folder.parent.name)
    if not folder.exists():
        raise CoopError(f"task folder not found: {folder}")
    if not folder.is_dir() or not match or not repo:
        raise CoopError(f"{folder}: not a task folder (expected dataset/<repo>_task/task<id>/)")
    for name in TASK_FILES:
        if not (folder / name).is_file():
            raise CoopError(f"{folder}: {name} is missing")
    base = re.search(r"^BASE_COMMIT=\"?([0-9a-f]{7,40})\"?", (folder / "setup.sh").read_text(), re.MULTILINE)
    if not base:
        raise CoopError(f"{folder / 'setup.sh'}: no BASE_COMMIT=<sha> line")
    features = {}
    for sub in sorted(folder.glob("feature*"), key=lambda p: int(p.name[7:]) if p.name[7:].isdigit() else -1):
        if not (sub.is_dir() and sub.name[7:].isdigit()):
            continue
        for name in FEATURE_FILES:
            if not (sub / name).is_file():
                raise CoopError(f"{sub}: {name} is missing")
        features[int(sub.name[7:])] = Feature(number=int(sub.name[7:]), folder=sub)
    if len(features) < 2:
        raise CoopError(f"{folder}: a task needs at least two feature<N>/ folders")
    return CoopTask(
        folder=folder,
        repo_name=repo.group(1),
        task_id=int(match.group(1)),
        base_commit=base.group(1),
        features=features,
    )


def parse_pairs(task: CoopTask, spec: str) -> list[tuple[int, int]]:
    """`all` → every unordered pair; `1,2 3,4` → those pairs (each checked against the task's features)."""
    if spec.strip() == "all":
        return list(itertools.combinations(sorted(task.features), 2))
    pairs = []
    for item in spec.replace(";", " ").split():
        parts = item.split(",")
        if len(parts) != 2 or not all(part.strip().isdigit() for part in parts) or int(parts[0]) == int(parts[1]):
            raise CoopError(f"bad pair {item!r}: give two different feature numbers as i,j (or `all`)")
        first, second = int(parts[0]), int(parts[1])
        task.feature(first), task.feature(second)
        if (first, second) in pairs:
            raise CoopError(f"pair {first},{second} given twice (in {spec!r}): give each pair once")
        pairs.append((first, second))
    if not pairs:
        raise CoopError("no pair given: --pair i,j or --pairs all|i,j k,l")
    return pairs


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=os.environ | UNHOOKED)
    if check and result.returncode != 0:
        raise CoopError(f"git {' '.join(args)} failed in {repo}: {(result.stderr or result.stdout).strip()[:300]}")
    return result


def default_source(task_dir: Path) -> Path | None:
    """The bundle CooperBench ships beside its dataset folder (`repos/<repo>.bundle`), when there is one."""
    repos = task_dir.resolve().parents[2] / "repos" if len(task_dir.resolve().parents) > 2 else None
    bundles = sorted(repos.glob("*.bundle")) if repos and repos.is_dir() else []
    return bundles[0] if len(bundles) == 1 else None


def check_source(source: Path, option: str = "--repo-source") -> None:
    """A repository source git cannot read (neither a clone nor a bundle): one line, before anything is made."""
    if git(Path.cwd(), "ls-remote", str(source), check=False).returncode != 0:
        raise CoopError(f"{option} {source}: neither a git repository nor a bundle")


def checkout_base(task: CoopTask, source: Path, destination: Path) -> Path:
    """A clone of the repository source (a local clone or a git bundle, never the network) at the base commit."""
    if not source.exists():
        raise CoopError(f"repository source not found: {source} (give a local clone or a bundle with --repo-source)")
    shutil.rmtree(destination, ignore_errors=True)
    destination.parent.mkdir(parents=True, exist_ok=True)
    cloned = subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(source), str(destination)], capture_output=True, text=True
    )
    if cloned.returncode != 0:
        raise CoopError(f"cannot clone {source}: {' '.join(cloned.stderr.split())[:300]}")
    if git(destination, "cat-file", "-e", f"{task.base_commit}^{{commit}}", check=False).returncode != 0:
        raise CoopError(f"base commit {task.base_commit} of {task.name} is not in the repository source {source}")
    git(destination, "checkout", "-q", "-B", "base", task.base_commit)
    git(destination, "config", "user.email", "coop@llm-ide.local")
    git(destination, "config", "user.name", "llm-ide coop")
    return destination
