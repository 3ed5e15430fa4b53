from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_ide.environments.base import (
    CommandResult,
    Environment,
    EnvironmentFailure,
    FileSnapshot,
    FileSource,
    OutsideRepository,
)
from llm_ide.environments.local import LocalEnvironment
from llm_ide.environments.output import messages_from_config

__all__ = [
    "CommandResult",
    "Environment",
    "EnvironmentFailure",
    "FileSnapshot",
    "FileSource",
    "LocalEnvironment",
    "OutsideRepository",
    "make_environment",
]


def make_environment(
    config: dict[str, Any], repo: Path | None, run_id: str, image: str | None = None, tools_dir: Path | None = None
) -> Environment:
    """The environment that `config` (the whole config, or its `environment` section) asks for.

    local: commands run in `repo` on the host. docker: one container per run from `image` (else `environment.image`);
    `repo`, when given, is copied (`.git` included) into the container's workdir, else the image holds it there.
    """
    settings = config.get("environment", config)
    kind = settings.get("type", "local")
    if kind == "local":
        if repo is None:
            raise EnvironmentFailure("the local environment needs a repository (--repo PATH)")
        return LocalEnvironment(
            repo,
            env=settings.get("env") or {},
            command_timeout=settings["command_timeout"],
            output_max_bytes=settings["output_max_bytes"],
            tools_dir=tools_dir,
            messages=messages_from_config(settings),
            sandbox=settings.get("sandbox", "bwrap"),
            network=settings.get("network") != "none",
            writable=settings.get("writable") or [],
        )
    if kind == "docker":
        from llm_ide.environments.docker import DockerEnvironment

        return DockerEnvironment.from_config(settings, repo=repo, run_id=run_id, image=image)
    raise EnvironmentFailure(f"unknown environment type {kind!r} (expected local or docker)")
