"""The docker environment: session protocol (session.py), container lifecycle (container.py), our own commands' shell
code (shell.py), cleanup (cleanup.py)."""

from llm_ide.environments.docker.cleanup import (
    HOST_LABEL,
    LABEL,
    PID_LABEL,
    RUN_ID_LABEL,
    USER_LABEL,
    Sweep,
    cleanup_containers,
    close_all,
    connect,
    owner_alive,
    owner_labels,
    remove_container,
)
from llm_ide.environments.docker.container import DockerEnvironment
from llm_ide.environments.docker.images import BASE_IMAGE, ensure_image

__all__ = [
    "BASE_IMAGE",
    "HOST_LABEL",
    "LABEL",
    "PID_LABEL",
    "RUN_ID_LABEL",
    "USER_LABEL",
    "Sweep",
    "DockerEnvironment",
    "cleanup_containers",
    "close_all",
    "connect",
    "ensure_image",
    "owner_alive",
    "owner_labels",
    "remove_container",
]
