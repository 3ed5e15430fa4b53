"""Checks before a batch starts (the model: llm_ide/run/preflight.py; Docker) and the local checkout of an instance."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from llm_ide.run.preflight import (
    PROVIDER_KEYS,
    PROVIDER_URLS,
    PreflightError,
    check_model,
    check_network,
    check_readable,
    check_variants,
    check_writable,
    model_endpoint,
)
from llm_ide.swebench.dataset import Instance

__all__ = [
    "PROVIDER_KEYS",
    "PROVIDER_URLS",
    "SWEbenchError",
    "check_docker",
    "check_model",
    "check_network",
    "check_readable",
    "check_variants",
    "check_writable",
    "clone_for_local",
    "local_source",
    "model_endpoint",
]


class SWEbenchError(PreflightError):
    """A user error that stops the batch before it starts (unreachable model, bad options)."""


def local_source(instance: Instance, repos: Path | None) -> str:
    """Where `--environment local` clones an instance's repository from: with `repos`, the folder's
    `<owner>__<name>.bundle` or clone `<owner>__<name>/` (as the instance id names it); else the row's `repo`: a
    local clone or bundle (a path), a URL, or `owner/name` on GitHub."""
    if repos is not None:
        stem = instance.instance_id.rsplit("-", 1)[0]
        candidates = [repos / f"{stem}.bundle", repos / stem, repos / f"{stem}.git"]
        found = next((path for path in candidates if path.exists()), None)
        if found is None:
            raise SWEbenchError(f"{instance.instance_id}: --repos {repos} holds no {stem}.bundle nor a clone {stem}/")
        return str(found.absolute())
    source = instance.repo
    if not source:
        raise SWEbenchError(f"{instance.instance_id}: the local environment needs the row's `repo` field (or --repos)")
    if Path(source).expanduser().exists():
        return str(Path(source).expanduser().absolute())
    if source.startswith(("/", "./", "../", "~")):  # a path, not GitHub's owner/name
        raise SWEbenchError(f"{instance.instance_id}: its repository {source} is not there (the row's `repo` field)")
    return source if "://" in source or source.startswith("git@") else f"https://github.com/{source}.git"


def clone_for_local(instance: Instance, destination: Path, repos: Path | None = None) -> Path:
    """For `--environment local`: a checkout of the instance's repository at its base commit (reused on resume),
    cloned from `local_source`. A bundle or clone without the base commit may hold a branch named after the instance
    at its tree (the shape of per-instance bundles): that branch is checked out then."""
    if (destination / ".git").exists():
        return destination
    source = local_source(instance, repos)
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        git(instance, ["clone", "-q", "--no-checkout", source, str(partial)])
        wanted = instance.base_commit or "HEAD"
        if not holds(partial, f"{wanted}^{{commit}}"):
            branch = f"origin/{instance.instance_id}"
            if not holds(partial, branch):
                raise SWEbenchError(
                    f"{instance.instance_id}: {source} holds neither the base commit {wanted} nor a branch "
                    f"{instance.instance_id}"
                )
            wanted = branch
        git(instance, ["-C", str(partial), "checkout", "-q", "--detach", wanted])
    except BaseException:  # no half clone left behind (a whole repository's objects)
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(destination)
    return destination


def holds(clone: Path, revision: str) -> bool:
    found = subprocess.run(["git", "-C", str(clone), "rev-parse", "-q", "--verify", revision], capture_output=True)
    return found.returncode == 0


def git(instance: Instance, arguments: list[str]) -> None:
    result = subprocess.run(["git", *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise SWEbenchError(f"{instance.instance_id}: git {' '.join(arguments)} failed: {result.stderr.strip()[:500]}")


def check_docker() -> None:
    import docker

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as error:
        raise SWEbenchError(
            f"the Docker engine is not reachable ({error}); "
            "start it (scripts/start_docker.sh) or use --environment local"
        ) from None
