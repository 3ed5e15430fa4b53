from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llm_ide.environments.base import (
    CommandResult,
    Environment,
    EnvironmentFailure,
    FileSnapshot,
    FileSource,
    OutsideRepository,
)
from llm_ide.environments.local import LocalEnvironment

if TYPE_CHECKING:
    from llm_ide.settings import EnvironmentSettings

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
    settings: EnvironmentSettings,
    repo: Path | None,
    run_id: str,
    image: str | None = None,
    tools_dir: Path | None = None,
    leftovers: Path | None = None,
) -> Environment:
    """The environment that the `environment` settings ask for.

    local: commands run in `repo` on the host (`leftovers`: the run's record of its processes and temp folders).
    docker: one container per run from `image` (else `environment.image`); `repo`, when given, is copied (`.git`
    included) into the container's workdir, else the image holds it there.
    """
    if settings.type == "local":
        if repo is None:
            raise EnvironmentFailure("the local environment needs a repository (--repo PATH)")
        return LocalEnvironment(
            repo,
            env=settings.env,
            command_timeout=settings.command_timeout,
            output_max_bytes=settings.output_max_bytes,
            tools_dir=tools_dir,
            messages=settings.messages.model_dump(),
            sandbox=settings.sandbox,
            network=settings.network != "none",
            writable=settings.writable,
            leftovers=leftovers,
            mount_at=settings.mount_at,
        )
    from llm_ide.environments.docker import DockerEnvironment

    return DockerEnvironment.from_config(settings, repo=repo, run_id=run_id, image=image)
