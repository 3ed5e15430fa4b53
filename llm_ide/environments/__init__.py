"""Where the agent's commands run: a registry of environment kinds, each a class that declares its capabilities
(what the rest of the program asks instead of its name) and builds itself from the `environment` settings. A kind is
loaded when it is first looked up (KINDS, or `LocalEnvironment` from this package): a local run never imports the
docker SDK, `--help` and completion no kind at all. The interface the kinds share is `llm_ide.environments.base`
(imported from there: the registry alone, which `--help` reads, spares its templates and settings)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_ide.errors import UsageError

if TYPE_CHECKING:
    from llm_ide.environments.base import Capabilities, Environment
    from llm_ide.environments.local import LocalEnvironment
    from llm_ide.settings import EnvironmentSettings

__all__ = [
    "KINDS",
    "LocalEnvironment",
    "capabilities",
    "environment_kind",
    "make_environment",
]


def local_environment() -> type[Environment]:
    """The local kind (its output templates and settings: a tenth of a second the command line's help spares)."""
    from llm_ide.environments.local import LocalEnvironment

    return LocalEnvironment


def docker_environment() -> type[Environment]:
    """The docker kind, imported for the runs that ask for it (the docker SDK and `requests` take a quarter second)."""
    from llm_ide.environments.docker.container import DockerEnvironment

    return DockerEnvironment


def __getattr__(name: str) -> Any:
    if name == "LocalEnvironment":
        return local_environment()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Kinds(Mapping[str, "type[Environment]"]):
    """The environment kinds by name (each class's `kind`), a kind's class loaded when it is looked up."""

    def __init__(self, loaders: dict[str, Callable[[], type[Environment]]]) -> None:
        self.loaders = loaders

    def __getitem__(self, name: str) -> type[Environment]:
        return self.loaders[name]()

    def __contains__(self, name: object) -> bool:  # (Mapping's would load the kind)
        return name in self.loaders

    def __iter__(self) -> Iterator[str]:
        return iter(self.loaders)

    def __len__(self) -> int:
        return len(self.loaders)


KINDS: Mapping[str, type[Environment]] = Kinds({"local": local_environment, "docker": docker_environment})


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
