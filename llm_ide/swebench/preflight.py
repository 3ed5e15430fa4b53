"""Checks before a batch starts (model, endpoint, Docker) and the local checkout of an instance."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from llm_ide.errors import UsageError
from llm_ide.run.history import mark_owned
from llm_ide.settings import Settings
from llm_ide.swebench.dataset import Instance


class SWEbenchError(UsageError, ValueError):
    """A user error that stops the batch before it starts (unreachable model, bad options)."""


def model_endpoint(model: str, base_url: str | None) -> str | None:
    """The URL an OpenAI-compatible `--model` talks to; None when we cannot tell (scripted, other providers)."""
    if model.startswith("scripted:"):
        return None
    default = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    if ":" in model:
        from llm_ide.models import langchain_providers

        provider = model.split(":", 1)[0]
        if provider in langchain_providers():
            return default if provider == "openai" else base_url
    return default


def missing_openai_key(model: str, settings: Settings, base_url: str | None) -> str | None:
    """Checked before anything heavy is imported: an OpenAI model (`openai:NAME`, or a bare name without a URL of a
    keyless local server) needs OPENAI_API_KEY unless the settings' model kwargs carry a key."""
    if os.environ.get("OPENAI_API_KEY") or {"api_key", "openai_api_key"} & set(settings.model.kwargs):
        return None
    if model.startswith("openai:"):
        return f"model {model}: OPENAI_API_KEY is not set"
    if ":" not in model and not (base_url or os.environ.get("OPENAI_BASE_URL")):
        hint = "for a keyless local server give --base-url or OPENAI_BASE_URL"
        return f"model {model}: OPENAI_API_KEY is not set ({hint})"
    return None


def check_model(model: str, settings: Settings, base_url: str | None, timeout: float = 5.0) -> None:
    """Fail before the batch when the model cannot be built or its endpoint does not accept connections."""
    model = model.replace("{attempt}", "1")  # one model per attempt (llm_ide/attempts): the first one's is checked
    if problem := missing_openai_key(model, settings, base_url):
        raise SWEbenchError(problem)
    from llm_ide.models import ModelError, get_model

    try:
        get_model(model, settings.model, base_url)
    except ModelError as error:
        raise SWEbenchError(str(error)) from None
    url = model_endpoint(model, base_url)
    if url is None:
        return
    parsed = urlparse(url)
    host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise SWEbenchError(
            f"could not reach model {model} at {url} ({error.strerror or error}); give a reachable OpenAI-compatible "
            "endpoint with --base-url URL or OPENAI_BASE_URL (or use --model scripted:FILE.yaml for a dry run)"
        ) from None


def clone_for_local(instance: Instance, destination: Path) -> Path:
    """For `--environment local`: a checkout of the instance's repository at its base commit (reused on resume)."""
    if (destination / ".git").exists():
        return destination
    source = instance.repo
    if not source:
        raise SWEbenchError(f"{instance.instance_id}: the local environment needs the row's `repo` field")
    if not (Path(source).exists() or "://" in source or source.startswith("git@")):
        source = f"https://github.com/{source}.git"
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    steps = [["git", "clone", "-q", source, str(partial)]]
    if instance.base_commit:
        steps.append(["git", "-C", str(partial), "checkout", "-q", instance.base_commit])
    for command in steps:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise SWEbenchError(f"{instance.instance_id}: {' '.join(command)} failed: {result.stderr.strip()[:500]}")
    mark_owned(partial)  # ours: what came after the base commit is removed before the agent starts (run/history.py)
    partial.rename(destination)
    return destination


def check_docker() -> None:
    import docker

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as error:
        raise SWEbenchError(
            f"the Docker engine is not reachable ({error}); "
            "start it (scripts/start_docker.sh) or use --environment local"
        ) from None
