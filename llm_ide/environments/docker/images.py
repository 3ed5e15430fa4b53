"""The images and the network of our containers: an image found locally or pulled, the bridge network created once."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.docker.cleanup import one_line

BASE_IMAGE = "llm-ide-base:bookworm"
DEFAULT_NETWORK = "llm-ide"

__all__ = ["BASE_IMAGE", "DEFAULT_NETWORK", "ensure_image", "ensure_network", "network_mode"]


def ensure_image(client: docker.DockerClient, image: str, pull: str) -> None:
    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 400:
            raise
        why = one_line(error.explanation or error).rpartition("invalid reference format")[2].strip(": ")
        raise EnvironmentFailure(f"docker image {image!r} is not a valid image name ({why or 'its format'})") from None
    hint = (
        "build it with scripts/build_base_image.sh"
        if image == BASE_IMAGE
        else f"pull or build it (docker pull {image}); scripts/build_base_image.sh builds the small local base image"
    )
    if pull != "missing":
        raise EnvironmentFailure(f"docker image {image} not found locally; {hint}")
    try:
        client.images.pull(image)
    except docker.errors.DockerException as error:
        raise EnvironmentFailure(
            f"docker image {image} not found locally and could not be pulled ({one_line(error)}); {hint}"
        ) from None


def ensure_network(client: docker.DockerClient, name: str = DEFAULT_NETWORK) -> str:
    """Our bridge network (the containers reach the internet, package indexes, but not the host's 127.0.0.1), created
    once per host: its name, or its id while a copy of the name still in use makes the name ambiguous. Docker lets two
    concurrent creations make two networks of one name, and a container start then refuses the name: creation holds a
    host-wide lock, and extra copies are removed."""
    with host_lock("llm-ide-docker-network.lock"):
        found = _named(client, name)
        if not found:
            try:
                client.networks.create(name, driver="bridge", labels={"llm-ide": "1"}, check_duplicate=True)
            except docker.errors.APIError as error:
                raise EnvironmentFailure(f"cannot create the docker network {name}: {one_line(error)}") from None
            found = _named(client, name)
        keep, *extra = sorted(found, key=lambda network: (network.attrs.get("Created", ""), network.id))
        for network in extra:
            with contextlib.suppress(docker.errors.APIError):  # still in use by a container: it stays, unused by us
                network.remove()
        return name if len(_named(client, name)) == 1 else keep.id


@contextlib.contextmanager
def host_lock(name: str) -> Iterator[None]:
    """An exclusive flock on the temp folder's `name`, whichever user of the host made it (it is opened read-only, so
    another's, or a root run's, serves as it is; one made here is readable by all), never through a symbolic link."""
    path, flags = Path(tempfile.gettempdir()) / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        while True:
            with contextlib.suppress(FileNotFoundError):
                descriptor = os.open(path, flags)
                break
            with contextlib.suppress(FileExistsError):
                descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o444)
                os.fchmod(descriptor, 0o444)  # (whatever the umask)
                break
    except OSError as error:
        raise EnvironmentFailure(f"cannot take the lock {path}: {error.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def network_mode(client: docker.DockerClient, name: str) -> str:
    """The network a container joins: our bridge (made once), or a network of the engine (`none`, `host`, one of the
    user's) that exists, or another container's (`container:NAME`). A name the engine lacks is one line."""
    if name == DEFAULT_NETWORK:
        return ensure_network(client, name)
    try:
        if not name.startswith("container:"):
            client.networks.get(name)
    except docker.errors.NotFound:
        raise EnvironmentFailure(
            f"environment.network {name}: no such docker network (`docker network ls` lists them; none: no network)"
        ) from None
    return name


def _named(client: docker.DockerClient, name: str) -> list[Any]:
    return [network for network in client.networks.list(names=[name]) if network.name == name]
