"""How the driver reaches a Ray cluster: the one at `--address` (checked first: ray.init would wait minutes where no
Ray head listens or the head refuses its token), or a one-node cluster of its own, which a reaper takes down with the
driver however the driver ends (llm_ide/swebench/ray_reaper.py)."""

from __future__ import annotations

import logging
import math
import os
import socket
from contextlib import suppress
from functools import cache
from typing import Any

import grpc
import ray

try:  # Ray's private module (the token ray.init sends): in another Ray version the token check is left to ray.init
    from ray._private.authentication.grpc_authentication_client_interceptor import _get_authentication_metadata_tuple
except ImportError:
    _get_authentication_metadata_tuple = None  # type: ignore[assignment]

from llm_ide.environments.scratch import owned_tempdir
from llm_ide.swebench.preflight import PROVIDER_KEYS, PROVIDER_URLS, SWEbenchError
from llm_ide.swebench.ray_reaper import OWNER, Reaper
from llm_ide.swebench.ray_worker import DOCKER_SLOT

FORWARDED_ENV = (  # every provider's key and endpoint variable: the nodes build the model as the driver did
    "DOCKER_HOST",
    *(name for names in PROVIDER_KEYS.values() for name in names),
    *(name for names, _ in PROVIDER_URLS.values() for name in names),
)
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # a one-node cluster started by the batch: results are small
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(3) + b"\x04" + bytes(5)  # and an empty SETTINGS frame
HTTP2_SETTINGS = 4  # the type of the frame a gRPC server answers with first


def forwarded_env() -> dict[str, str]:
    """The environment the runs need on the nodes (model keys, LLM_IDE_* settings); Ray's workers do not inherit
    the driver's environment on a cluster started with `ray start`."""
    return {k: v for k, v in os.environ.items() if k in FORWARDED_ENV or k.startswith("LLM_IDE_")}


def connect(address: str | None, workers: int = 1, task_cpus: float = 1.0) -> Reaper | None:
    """Join the cluster at `--address`, or start a one-node cluster (workers × task CPUs, workers docker slots): then
    the reaper that ends it with the driver, for `disconnect`."""

    if ray.is_initialized():
        return None
    common: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "runtime_env": {"env_vars": forwarded_env()},
    }
    check_address(address)
    reaper = None if address else Reaper()
    try:
        if reaper is None:
            ray.init(address=address, **common)
        else:
            start_own_cluster(reaper, max(1, math.ceil(workers * task_cpus)), workers, common)  # whole CPUs only
    except (ConnectionError, RuntimeError, ValueError) as error:
        disconnect(reaper)
        where = address or "a local one-node cluster"
        raise SWEbenchError(f"could not connect to Ray at {where}: {' '.join(str(error).split())[:300]}") from None
    return reaper


def start_own_cluster(reaper: Reaper, cpus: int, workers: int, common: dict[str, Any]) -> None:
    """ray.init of a one-node cluster whose every process carries the reaper's token, its nodes' scratch folder (unless
    LLM_IDE_RAY_SCRATCH names one) and Ray's session folder in the reaper's hands."""
    if "LLM_IDE_RAY_SCRATCH" not in common["runtime_env"]["env_vars"]:
        common["runtime_env"]["env_vars"]["LLM_IDE_RAY_SCRATCH"] = owned_tempdir("ray")
        reaper.hold(common["runtime_env"]["env_vars"]["LLM_IDE_RAY_SCRATCH"])
    os.environ[OWNER] = reaper.token  # what the raylet and the GCS inherit, and what they start from them
    try:
        context = ray.init(
            num_cpus=cpus, resources={DOCKER_SLOT: workers}, object_store_memory=OBJECT_STORE_BYTES, **common
        )
    finally:
        os.environ.pop(OWNER, None)
    reaper.hold(context.address_info["session_dir"])


def disconnect(reaper: Reaper | None) -> None:
    """ray.shutdown, and the batch's own cluster gone whole: what Ray's shutdown left killed, its folders removed."""
    ray.shutdown()
    if reaper is not None:
        reaper.close()


@cache  # (the command line checks it before making any folder, connect() again: asked once)
def check_address(address: str | None) -> None:
    """A HOST:PORT `--address` is a Ray head that takes this driver's token (ray.init would wait minutes otherwise)."""
    host_port = address.rpartition(":") if address else ("", "", "")
    if address and host_port[2].isdigit() and (wrong := not_ray(*host_port[::2]) or token_refused(address)):
        raise SWEbenchError(f"could not connect to Ray at {address}: {wrong}")


def not_ray(host: str, port: str) -> str:
    """Why HOST:PORT is no Ray head ("" when it may be): ray.init retries one where nothing listens, or where
    something else does, for minutes, printing Ray's log lines, deaf to Ctrl-C. Ray's GCS speaks gRPC: it answers
    an HTTP/2 preface with a SETTINGS frame (not checked under TLS, RAY_USE_TLS)."""
    try:
        sock = socket.create_connection((host.removeprefix("ray://").strip("[]"), int(port)), timeout=10)
    except OSError:
        return "nothing listens there (ray start --head there?)"
    answer = b""
    with sock, suppress(OSError):
        if ray_tls():
            return ""
        sock.sendall(HTTP2_PREFACE)
        while len(answer) < 4 and (chunk := sock.recv(4 - len(answer))):
            answer += chunk
    if len(answer) < 4 or answer[3] != HTTP2_SETTINGS:
        return "what listens there is not a Ray head node (the --port of `ray start --head`, 6379 by default?)"
    return ""


def ray_tls() -> bool:
    """Whether Ray's gRPC runs over TLS (`RAY_USE_TLS`): the checks before ray.init speak it in the clear only."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def token_refused(address: str) -> str:
    """Why the head refuses this driver's token ("" if not): ray.init retries for 20 s, then names no token."""
    if address.startswith("ray://") or ray_tls() or _get_authentication_metadata_tuple is None:
        return ""
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId")
        try:
            call(b"", timeout=10, metadata=_get_authentication_metadata_tuple())
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                given = "refuses this token" if os.environ.get("RAY_AUTH_MODE") == "token" else "wants a token"
                return f"the cluster {given} (RAY_AUTH_MODE=token and RAY_AUTH_TOKEN as on its nodes)"
    return ""
