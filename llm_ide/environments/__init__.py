"""Where the agent's commands run: a registry of environment kinds, each a class that declares its capabilities
(what the rest of the program asks instead of its name) and builds itself from the `environment` settings."""

from __future__ import annotations

from pathlib import Path

from llm_ide.environments.base import (
    Capabilities,
    CommandResult,
    Environment,
    EnvironmentFailure,
    FileSnapshot,
    FileSource,
    OutsideRepository,
)
from llm_ide.environments.docker.container import DockerEnvironment
from llm_ide.environments.local import LocalEnvironment
from llm_ide.errors import UsageError
from llm_ide.settings import EnvironmentSettings

KINDS: dict[str, type[Environment]] = {kind.kind: kind for kind in (LocalEnvironment, DockerEnvironment)}

__all__ = [
    "KINDS",
    "Capabilities",
    "CommandResult",
    "Environment",
    "EnvironmentFailure",
    "FileSnapshot",
    "FileSource",
    "LocalEnvironment",
    "OutsideRepository",
    "capabilities",
    "environment_kind",
    "make_environment",
]


def environment_kind(name: str) -> type[Environment]:
    if name not in KINDS:
        raise UsageError(f"unknown environment {name!r}: choose one of {', '.join(KINDS)}")
    return KINDS[name]


def capabilities(name: str) -> Capabilities:
    return environment_kind(name).capabilities


def make_environment(
    settings: EnvironmentSettings,
    repo: Path | None,
    run_id: str,
    image: str | None = None,
    tools_dir: Path | None = None,
    leftovers: Path | None = None,
    output_dir: Path | None = None,
) -> Environment:
    """The environment that the `environment` settings ask for (its kind's `from_config`); `output_dir`: the run's
    own folder, which its commands never see and its patch never holds, wherever it is."""
    kind = environment_kind(settings.type)
    options = {"image": image, "tools_dir": tools_dir, "leftovers": leftovers, "output_dir": output_dir}
    return kind.from_config(settings, repo=repo, run_id=run_id, **options)
