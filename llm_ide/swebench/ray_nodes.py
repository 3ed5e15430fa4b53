"""The driver's look at a Ray cluster's nodes before a batch: each runs this version of llm-ide (a node without it
failed every instance sent there, each with a cut traceback of Ray's as its reason)."""

from __future__ import annotations

import re
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from llm_ide.swebench.preflight import SWEbenchError
from llm_ide.version import __version__

INSTALL = "pip install 'llm-ide[ray]' on every node, the driver's version"


def installed_version() -> str:
    return __version__  # the node's own: its worker imports this module by name


def check_packages(nodes: list[dict[str, Any]], timeout: float = 300) -> None:
    """Every node imports llm-ide, at the driver's version; else one line naming the node."""
    remote = ray.remote(installed_version)
    for node in nodes:
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        where = f"node {node['NodeID'][:8]} ({node.get('NodeManagerAddress', '?')})"
        try:
            version = ray.get(remote.options(num_cpus=0, scheduling_strategy=strategy).remote(), timeout=timeout)
        except ray.exceptions.RayError as error:
            raise SWEbenchError(f"{where} cannot run llm-ide ({why(error)}): {INSTALL} ({__version__})") from None
        if version != __version__:
            raise SWEbenchError(f"{where} has llm-ide {version}, the driver {__version__}: {INSTALL}")


def why(error: Exception) -> str:
    """The exception a node's worker raised, out of Ray's text around it (the task's traceback, sys.path)."""
    text = str(error)
    raised = re.findall(r"(?m)^\w*(?:Error|Exception): .*$", text)
    said = raised[-1] if raised else text.split("traceback:")[0].removeprefix("System error: ")
    return " ".join(said.split())[:200]
