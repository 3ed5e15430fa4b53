"""Every combination of the navigator, action sampling and the message channel either working end to end or refused in
one line (a person asked beside two agents messaging, a gate naming no action of the run); `navigator.mode: off`
unquoted in YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_script import FIX_SCRIPT, single_call, write_script
from variants_support import FIXED, MESSAGE, mailbox, run

from llm_ide.composition import compose
from llm_ide.config import load_config
from llm_ide.messages.variant import Messages
from llm_ide.navigator.variant import Navigator
from llm_ide.sampling.variant import Sampling
from llm_ide.variant import CombinationError, Variant


def sampled(script: list[str]) -> list[str]:
    """Each reply of a single-call run (a reflection and an action) twice: k=2 samples that agree (folded into one
    candidate, no choosing call)."""
    return [reply for item in single_call(script) for reply in (item, item)]


@pytest.mark.parametrize("navigator", [False, True])
@pytest.mark.parametrize("sampling", [False, True])
@pytest.mark.parametrize("messages", [False, True])
def test_every_combination_of_navigator_sampling_and_messages_runs(
    tmp_path: Path, navigator: bool, sampling: bool, messages: bool
) -> None:
    config: dict[str, Any] = {}
    if navigator:
        plan = ['<view>{"path": "shop/cart.py"}</view>', "<plan>Multiply price by quantity.</plan>"]
        config["navigator"] = {"mode": "model", "gate": [], "model": write_script(tmp_path / "nav.yaml", plan)}
    if sampling:
        config["sampling"] = {"k": 2}
    given = [Messages(mailbox(tmp_path))] if messages else []
    result, traj = run(tmp_path, sampled(FIX_SCRIPT) if sampling else FIX_SCRIPT, given, **config)
    assert result.exit_status == "submitted" and FIXED in result.submission
    first = traj["model_calls"][0]["prompt"]
    assert (MESSAGE in first) is messages  # taken in before the first step, after the navigator's plan too
    assert ("# Plan (from the navigator)\nMultiply price by quantity." in first) is navigator
    assert ("navigator" in traj["info"]) is navigator and ("received" in traj["info"]) is messages
    ops = traj["operations"]
    assert [op["action_type"] for op in ops] == ["view", "bash", "edit", "bash", "submit"]
    assert [op["candidates"][0]["samples"] if sampling else "candidates" in op for op in ops] == [sampling * 2] * 5
    calls = traj["info"]["model_stats"]["api_calls"]
    assert calls == 5 + 5 * sampling  # the driver's: one call per step (twice each when sampled)


def test_a_person_asked_in_one_run_is_refused_beside_two_agents_messaging(tmp_path: Path) -> None:
    with pytest.raises(CombinationError) as refused:
        run(tmp_path, FIX_SCRIPT, [Messages(mailbox(tmp_path))], navigator={"mode": "human"})
    assert str(refused.value) == (
        "navigator: asks a person in one run at a time; it does not combine with two agents messaging"
    )
    assert isinstance(Navigator("human"), Variant) and Sampling.enabled(load_config("default")) is None


@pytest.mark.parametrize(
    ("gate", "refused"),
    [
        (["edti", "bsh"], "navigator.gate: no action bsh, edti"),  # a typo turned the gate off: every action ran
        (["edit", "create", "bash"], None),
        (["bash", "send_message"], "navigator.gate: no action send_message"),  # not an action of this run…
    ],
)
def test_a_gate_naming_no_action_of_the_run_is_refused(tmp_path: Path, gate: list[str], refused: str | None) -> None:
    settings = load_config("default", navigator={"mode": "model", "gate": gate})
    if refused is None:
        assert [variant.name for variant in compose(settings).items] == ["navigator"]
        return
    with pytest.raises(CombinationError) as error:
        compose(settings)
    assert str(error.value).startswith(f"{refused} (the run's actions: bash, create, edit, request_guidance, ")
    if "send_message" in gate:  # … but of a run whose agents message each other
        assert [v.name for v in compose(settings, [Messages(mailbox(tmp_path))]).items] == ["messages", "navigator"]


def test_navigator_mode_off_unquoted_in_yaml_is_off(tmp_path: Path) -> None:
    """YAML reads `off` as false: the setting still means off (it was refused as "got False")."""
    (config := tmp_path / "c.yaml").write_text("navigator: {mode: off, gate: [bash]}\n")
    settings = load_config("default", [config])
    assert settings.navigator.mode == "off" and compose(settings).items == ()
