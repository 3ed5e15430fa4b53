"""`navigator.mode` → the navigator a run consults (None: off)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_ide.call_policy import CallPolicy
from llm_ide.codebase import Codebase
from llm_ide.models import Model, get_model
from llm_ide.navigator.human import HumanNavigator
from llm_ide.navigator.mcp_client import McpNavigator
from llm_ide.navigator.model import ModelNavigator
from llm_ide.navigator.protocol import Navigator


def make_navigator(
    settings: Any,
    codebase: Codebase,
    model_spec: str,
    base_url: str | None = None,
    record_call: Callable[[dict[str, Any]], None] | None = None,
    policy: CallPolicy | None = None,
    model_for: Callable[[str, str | None], Model] | None = None,
) -> Navigator | None:
    """`policy`: the run's model-call policy (its budget), for a navigator that calls a model; `model_for`: the run's
    model factory (else a model of its own is made)."""
    config = settings.navigator
    if config.mode == "model":
        spec, url = config.model or model_spec, config.base_url or base_url
        model = model_for(spec, url) if model_for is not None else get_model(spec, settings.model, url)
        return ModelNavigator(settings, model, codebase, record_call=record_call, policy=policy)
    if config.mode == "human":
        return HumanNavigator(config)
    if config.mode == "mcp":
        return McpNavigator(config.url, config.permission_timeout, config.review_timeout)
    return None
