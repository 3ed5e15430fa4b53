"""A per-user cache of built tool environments, keyed by the tool's source and the interpreter it is built from.

Local: a tool is built in place in its cache entry (`<root>/local/<tool>-<key>/`) and every later run uses it from
there. Docker: the tool is built in the container, then its folder and environment are copied out into the entry
(`<root>/docker/<tool>-<key>/<same absolute paths>`); the entries are mounted read-only into each container and a warm
install links the paths to them (or, where the engine cannot see the host's folder, copies them in). Either way a
warm install runs no pip and needs no network.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import posixpath
import shlex
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_ide.environments.base import Environment, EnvironmentFailure
from llm_ide.environments.tools_cache import default_root
from llm_ide.tools.config import ToolConfig
from llm_ide.tools.plan import Target, build_steps, interpreter_probe, isolation, quote, tool_dir, venv_dir

log = logging.getLogger("llm_ide.tools")
said = logging.getLogger("llm_ide.environment")  # shown on the console as it happens: a cache that cannot be used

SKIPPED = {"__pycache__", ".git", "build", "dist", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
COMPLETE = ".complete"
MANIFEST = ".paths.json"  # docker: the absolute paths in the container that the entry holds
EXTRACT: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
PROBE_TIMEOUT = 60.0


class CacheUnavailable(Exception):
    """The cache folder cannot be written (read-only home, full disk): tools install without it."""


def cache_entries(root: Path) -> list[tuple[str, str, int]]:
    """(local | docker, entry name, bytes) of each complete entry."""
    found = []
    for kind in ("local", "docker"):
        folder = root / kind
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            if (entry / COMPLETE).is_file():
                size = sum(path.lstat().st_size for path in entry.rglob("*"))
                found.append((kind, entry.name, size))
    return found


def clear_cache(root: Path) -> None:
    for part in ("local", "docker", "locks"):
        shutil.rmtree(root / part, ignore_errors=True)


def source_digest(folder: Path) -> str:
    """The tool's source tree: relative paths and bytes, without caches and build output."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part in SKIPPED or part.endswith(".egg-info") for part in relative.parts) or path.suffix == ".pyc":
            continue
        if path.is_symlink():
            digest.update(f"{relative}\0->{os.readlink(path)}\0".encode())
        elif path.is_file():
            digest.update(f"{relative}\0{path.stat().st_mode & 0o111}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(tool: ToolConfig, target: Target, identity: str) -> str:
    """Tool source hash + interpreter: the build commands (with a neutral root), the source tree, the interpreter."""
    neutral = Target("$ROOT", conda=target.conda, local=target.local)
    commands = [step.command for step in build_steps(tool, neutral) if step.copy is None]
    material = {
        "tool": tool.tool_name,
        "version": tool.version,
        "build": commands,
        "source": source_digest(tool.source) if tool.source else None,
        "interpreter": identity,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


class FileSink:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def feed(self, data: bytes) -> None:
        self.handle.write(data)


@dataclass
class Lookup:
    target: Target  # where the tool is (for local: its cache entry)
    hit: bool  # installed from the cache (nothing was built)
    key: str | None = None  # None: not cacheable here (no interpreter found, local conda, an unknown environment)
    entry: Path | None = None  # local: the cache entry the tool is used from in place


@dataclass(frozen=True)
class ToolCache:
    root: Path

    @classmethod
    def default(cls) -> ToolCache | None:
        root = default_root()
        return cls(root) if root is not None else None

    def local_entry(self, tool: ToolConfig, key: str) -> Path:
        return self.root / "local" / f"{tool.tool_name}-{key}"

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Runs on this host that build the same entry wait for each other."""
        folder = self.root / "locks"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / f"{name}.lock", "a")  # noqa: SIM115 (closed below)
        except OSError as error:
            raise CacheUnavailable(f"{folder}: {error.strerror or error}") from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def install(
        self, env: Environment, tool: ToolConfig, target: Target, build: Callable[[Target], None], timeout: float
    ) -> Lookup:
        """Puts the built tool in place from the cache, else builds it with `build(target)` and keeps the result."""
        local = target.local and isolation(tool, target) != "conda"  # a conda env lives outside the entry
        tree = not target.local and not env.capabilities.tools_mount  # built inside: copied out and back in
        identity = probe(env, tool, target) if local or tree else None
        if identity is None:
            build(target)
            return Lookup(target, hit=False)
        key = cache_key(tool, target, identity)
        try:
            if local:
                return self._local(env, tool, target, key, identity, build)
            return self._docker(env, tool, target, key, identity, build, timeout)
        except CacheUnavailable as error:
            said.warning("tool %s: the tool cache cannot be used (%s); installing without it", tool.tool_name, error)
        build(target)
        return Lookup(target, hit=False)

    def _local(
        self, env: Environment, tool: ToolConfig, target: Target, key: str, identity: str, build: Callable
    ) -> Lookup:
        entry = self.local_entry(tool, key)
        here = Target(str(entry), conda=target.conda, local=True)
        with self.locked(entry.name):
            if allow_read := getattr(env, "allow_read", None):  # a sandboxed local environment: the tool is run
                allow_read(entry)
            if (entry / COMPLETE).is_file():
                return Lookup(here, hit=True, key=key, entry=entry)
            shutil.rmtree(entry, ignore_errors=True)
            try:
                entry.mkdir(parents=True)
            except OSError as error:
                raise CacheUnavailable(f"{entry}: {error.strerror or error}") from None
            if allow_write := getattr(env, "allow_write", None):  # a sandboxed local environment: the build writes
                allow_write(entry)
            try:
                build(here)
            except BaseException:
                shutil.rmtree(entry, ignore_errors=True)
                raise
            finally:  # built: read-only to the run's commands, as to every later run's (nothing they write is kept)
                if disallow_write := getattr(env, "disallow_write", None):
                    disallow_write(entry)
            try:
                (entry / COMPLETE).write_text(identity + "\n", encoding="utf-8")
            except OSError as error:  # usable by this run; the next one builds it again
                log.warning("tool %s: %s not marked complete (%s)", tool.tool_name, entry, error)
        return Lookup(here, hit=False, key=key, entry=entry)

    def _docker(
        self,
        env: Environment,
        tool: ToolConfig,
        target: Target,
        key: str,
        identity: str,
        build: Callable,
        timeout: float,
    ) -> Lookup:
        entry = self.root / "docker" / f"{tool.tool_name}-{key}"
        if not (entry / COMPLETE).is_file():
            with self.locked(entry.name):
                if not (entry / COMPLETE).is_file():
                    build(target)
                    keep_tree(env, tool, target, entry, identity, timeout)
                    return Lookup(target, hit=False, key=key)
        try:
            put_in_place(env, entry, timeout)
            return Lookup(target, hit=True, key=key)
        except (OSError, EnvironmentFailure, tarfile.TarError) as error:
            log.warning("tool %s: cached %s not usable (%s); building it", tool.tool_name, entry, error)
        build(target)
        return Lookup(target, hit=False, key=key)


def keep_tree(env: Environment, tool: ToolConfig, target: Target, entry: Path, identity: str, timeout: float) -> None:
    """Copies what the build made in the container (the tool's folder and environment) into the cache entry. Runs
    under the entry's lock: another `.partial` of this entry was left by a process that died while copying."""
    for stale in entry.parent.glob(f"{entry.name}.*.partial"):
        shutil.rmtree(stale, ignore_errors=True)
    partial = entry.with_name(f"{entry.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        paths = [*([tool_dir(tool, target)] if tool.source else []), environment_path(env, tool, target)]
        partial.mkdir(parents=True)
        with tempfile.TemporaryFile() as handle:
            export_tree(env, paths, FileSink(handle), timeout)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as archive:
                archive.extractall(partial, **EXTRACT)
        (partial / MANIFEST).write_text(json.dumps(paths), encoding="utf-8")
        (partial / COMPLETE).write_text(identity + "\n", encoding="utf-8")
        shutil.rmtree(entry, ignore_errors=True)  # what an interrupted build left
        os.rename(partial, entry)
    except (OSError, tarfile.TarError) as error:
        log.warning("tool %s: not cached (%s)", tool.tool_name, error)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def put_in_place(env: Environment, entry: Path, timeout: float) -> None:
    """Links the entry's paths to the read-only mount of the cache, else (an engine on another host, where the mount
    is empty) copies them in."""
    paths: list[str] = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
    mount = getattr(env, "tools_cache_mount", None)
    if mount and Path(mount[0]).resolve() == entry.parent.resolve():
        inside = f"{mount[1]}/{entry.name}"
        links = [
            f"mkdir -p {quote(posixpath.dirname(path))} && rm -rf {quote(path)} && ln -s {quote(inside + path)} "
            + quote(path)
            for path in paths
        ]
        result = env.execute(" && ".join([f"test -f {quote(inside)}/{COMPLETE}", *links]), timeout=timeout)
        if result.returncode == 0:
            return
        log.info("the tool cache is not visible in the container (%s); copying %s in", result.output.strip(), entry)
    with tempfile.TemporaryFile() as handle:
        with tarfile.open(fileobj=handle, mode="w") as archive:
            for path in paths:
                archive.add(entry / path.lstrip("/"), arcname=path.lstrip("/"))
        handle.seek(0)
        import_tree(env, handle)


def export_tree(env: Any, paths: list[str], sink: FileSink, timeout: float) -> None:
    """Streams a tar of these absolute paths in the container (members relative to /) into `sink`."""
    command = "tar -cf - -C / -- " + " ".join(shlex.quote(path.lstrip("/")) for path in paths) + " 2>/dev/null"
    returncode, _, lost = env.run(command, sink, timeout)
    if lost or returncode != 0:
        raise OSError(f"archiving {', '.join(paths)} in the container failed (tar exit status {returncode})")


def import_tree(env: Any, archive: Any) -> None:
    """Unpacks a tar whose members are relative to / at the same paths in the container."""
    import docker.errors

    if env.container_id is None:
        raise EnvironmentFailure("the docker environment is closed")
    try:
        env.client.api.put_archive(env.container_id, "/", archive)
    except docker.errors.DockerException as error:
        raise OSError(f"copying into the container failed: {error}") from None


def probe(env: Environment, tool: ToolConfig, target: Target) -> str | None:
    result = env.execute(interpreter_probe(tool, target), timeout=PROBE_TIMEOUT)
    lines = result.output.strip().splitlines()
    if result.returncode != 0 or result.timed_out or not lines:
        log.info("tool %s: no interpreter to key the cache with: %s", tool.tool_name, result.output.strip()[-300:])
        return None
    return lines[-1].strip()


def environment_path(env: Environment, tool: ToolConfig, target: Target) -> str:
    """Where the tool's environment lives: its venv, or its conda environment's prefix."""
    if isolation(tool, target) != "conda":
        return venv_dir(tool, target)
    script = quote("import sys; print(sys.prefix)")
    result = env.execute(f"conda run -n {tool.tool_name} python -c {script}", timeout=PROBE_TIMEOUT)
    prefix = result.output.strip().splitlines()[-1:] if result.returncode == 0 else []
    if not prefix or not prefix[0].startswith("/"):
        raise OSError(f"the prefix of conda environment {tool.tool_name} is unknown: {result.output.strip()[-200:]}")
    return prefix[0]
