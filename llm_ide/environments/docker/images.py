"""The images and the network of our containers: an image found locally or pulled, the bridge network created once."""

from __future__ import annotations

import docker
import docker.errors

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.docker.cleanup import one_line

BASE_IMAGE = "llm-ide-base:bookworm"
DEFAULT_NETWORK = "llm-ide"

__all__ = ["BASE_IMAGE", "DEFAULT_NETWORK", "ensure_image", "ensure_network"]


def ensure_image(client: docker.DockerClient, image: str, pull: str) -> None:
    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
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


def ensure_network(client: docker.DockerClient) -> None:
    """Our bridge network: the containers reach the internet (package indexes) but not the host's 127.0.0.1."""
    if client.networks.list(names=[DEFAULT_NETWORK]):
        return
    try:
        client.networks.create(DEFAULT_NETWORK, driver="bridge", labels={"llm-ide": "1"})
    except docker.errors.APIError as error:
        if not client.networks.list(names=[DEFAULT_NETWORK]):  # not a concurrent creation by another run
            raise EnvironmentFailure(f"cannot create the docker network {DEFAULT_NETWORK}: {one_line(error)}") from None
