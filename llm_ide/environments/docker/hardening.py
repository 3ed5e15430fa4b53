"""What a run's container may do (`environment` settings): the commands' user, the capabilities left to root in it
(`cap_drop: ALL`, then `cap_add`), no new privileges (a setuid program gains none), and its CPU, memory and process
limits. PID 1 and our own set-up run as root; the commands' shell session runs as the commands' user."""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
from docker.utils.socket import frames_iter

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.docker.cleanup import one_line
from llm_ide.settings import EnvironmentSettings, bundled_yaml

ROOT = "0:0"
ROOT_NAMES = {"", "root", "0", "0:0", "root:root"}


@dataclass(frozen=True)
class Limits:
    cpus: float | None = None  # CPUs the container may use (capped at the engine's)
    memory: str | int | None = None  # docker's mem_limit
    pids_limit: int | None = None
    user: str = "auto"  # the commands' user: auto is the image's own (root when it declares none)
    cap_add: tuple[str, ...] = ()  # the capabilities kept; every other one is dropped
    no_new_privileges: bool = True

    @classmethod
    def of(cls, settings: EnvironmentSettings) -> Limits:
        return cls(
            cpus=settings.cpus,
            memory=settings.memory,
            pids_limit=settings.pids_limit,
            user=settings.user,
            cap_add=tuple(settings.cap_add),
            no_new_privileges=settings.no_new_privileges,
        )

    @classmethod
    def bundled(cls) -> Limits:
        """The bundled config's (a container made without settings)."""
        return cls.of(EnvironmentSettings.model_validate(bundled_yaml("default.yaml")["environment"]))

    def create_options(self, client: docker.DockerClient) -> dict[str, Any]:
        """The options of `containers.create` that hold the container in."""
        options: dict[str, Any] = {"user": ROOT, "cap_drop": ["ALL"], "cap_add": [cap.upper() for cap in self.cap_add]}
        if self.no_new_privileges:
            options["security_opt"] = ["no-new-privileges:true"]
        if self.pids_limit:
            options["pids_limit"] = self.pids_limit
        if self.cpus:
            options["nano_cpus"] = int(min(float(self.cpus), engine_cpus(client)) * 1e9)
        if self.memory:
            options["mem_limit"] = self.memory
        return options

    def commands_user(self, client: docker.DockerClient, image: str) -> str:
        """Who runs the commands: `user`, or the image's declared user for `auto`; "" for root."""
        user = self.user
        if user == "auto":
            try:
                user = client.images.get(image).attrs.get("Config", {}).get("User") or ""
            except docker.errors.DockerException as error:
                raise EnvironmentFailure(f"cannot inspect the image {image}: {one_line(error)}") from None
        return "" if user.strip() in ROOT_NAMES else user.strip()


def engine_cpus(client: docker.DockerClient) -> float:
    """The CPUs the engine has (a larger limit is refused by it)."""
    try:
        return float(client.info().get("NCPU") or 1)
    except docker.errors.DockerException:
        return 1.0


def run_attached(
    api: docker.APIClient, container_id: str, argv: list[str], user: str = ROOT, workdir: str | None = None
) -> tuple[int, str]:
    """`argv` in the container, as `user`: its exit status and output (stdout, then stderr as they come). It starts
    once a line is sent on its stdin, after its output is attached: output written before the attach can be lost
    (moby#27289)."""
    gated = ["sh", "-c", 'read _ && exec "$@" </dev/null', "sh", *argv]  # (no stdin left to wait on)
    exec_id = api.exec_create(container_id, gated, user=user or ROOT, stdin=True, workdir=workdir)["Id"]
    raw = api.exec_start(exec_id, socket=True)
    sock = getattr(raw, "_sock", raw)
    with contextlib.closing(sock), contextlib.closing(raw):
        with contextlib.suppress(OSError):  # (an unknown user: the exec has ended already)
            sock.sendall(b"\n")
        output = b"".join(data for _, data in frames_iter(raw, tty=False))
    return api.exec_inspect(exec_id)["ExitCode"], output.decode(errors="replace")


def run_as(api: docker.APIClient, container_id: str, script: str, user: str) -> tuple[int, str]:
    """One of our set-up commands in the container, as `user`: its exit status and output."""
    return run_attached(api, container_id, ["sh", "-c", script], user)


def unknown_names(user: str) -> str:
    """A script printing which names of `user` (`name`, `name:group`) the image's /etc/passwd and /etc/group lack, as
    docker looks them up (an unknown user's exec can end before its reason is attached)."""
    name, _, group = user.partition(":")
    checks = [
        f"cut -d: -f1 /etc/{table} | grep -qxF -- {quoted} || echo no {kind} {quoted} in /etc/{table}"
        for part, kind, table in ((name, "user", "passwd"), (group, "group", "group"))
        if part and not part.isdigit() and (quoted := shlex.quote(part))
    ]
    return " ; ".join(checks) or "true"


def hand_over(api: docker.APIClient, container_id: str, user: str, folders: list[str]) -> tuple[int, int]:
    """The commands' user's numeric ids; `folders` made (as root) and given to them (not their content: a workdir the
    image holds stays as the image has it)."""
    if not user:
        return 0, 0
    code, output = run_as(api, container_id, "id -u && id -g", user)
    ids = output.split()
    if code != 0 or len(ids) != 2 or not all(part.isdigit() for part in ids):
        reason = run_as(api, container_id, unknown_names(user), ROOT)[1] or output or f"exit {code}"
        raise EnvironmentFailure(f"environment.user {user}: not a user of this image ({' '.join(reason.split())})")
    uid, gid = int(ids[0]), int(ids[1])
    quoted = " ".join(shlex.quote(folder) for folder in folders)
    code, output = run_as(api, container_id, f"mkdir -p -- {quoted} && chown {uid}:{gid} -- {quoted}", ROOT)
    if code != 0:
        raise EnvironmentFailure(f"cannot give {user} its folders: {' '.join(output.split())[:300]}")
    return uid, gid


def refuse_unwritable(api: docker.APIClient, container_id: str, user: str, workdir: str) -> None:
    """A repository the image holds that the commands' user cannot write (root's files, the image's `USER dev`) is
    refused in one line: every edit of the run would fail, and it would submit an empty patch as a success."""
    if not user:
        return
    top = shlex.quote(workdir)  # (git's objects are read-only to their owner too; what the user owns it can chmod)
    prune = f"-path {top}/.git/objects -prune"
    found = f'find {top} {prune} -o ! -type l ! -writable ! -user "$(id -u)" -print -quit 2>/dev/null'
    output = run_as(api, container_id, f'p=$({found}); [ -z "$p" ] || stat -c "%U %n" -- "$p"', user)[1].strip()
    if output:
        owner, _, path = output.partition(" ")
        raise EnvironmentFailure(
            f"environment.user {user} cannot write {path} (owned by {owner}) in the repository the image holds: "
            "set environment.user to its owner (`user: root`), or make the image's repository its user's"
        )
