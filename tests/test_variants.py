"""Variants plug in through llm_ide/variant.py without touching a core file: toy variants written here (a node that
logs every action, an action of its own, a phase before the main loop with hooks at set-up and at submit, a settings
section of its own, facts for the reviewer), and a variant given twice refused in one line (the bundled variants'
combinations: test_variant_combinations). Each run is `run_task` on a real repository with scripted models."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from agent_script import (
    BUGGY_FILES,
    CART_FIX,
    CART_SUBMIT,
    CART_TESTS,
    FIX_SCRIPT,
    TEST_COMMAND,
    act,
    reflect,
    write_script,
)
from conftest import make_git_repo
from langgraph.runtime import Runtime
from navigator_support import CHEAT, PLAN
from typing_extensions import TypedDict
from variants_support import FIXED, TASK, run

from llm_ide.attempts.run import run_attempts
from llm_ide.codebase import ActionOutcome, ParamError
from llm_ide.composition import BUNDLED
from llm_ide.config import ConfigError, load_config
from llm_ide.file_actions import file_text, named_path
from llm_ide.graph import build_graph
from llm_ide.navigator.variant import Navigator
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.sampling.variant import Sampling
from llm_ide.settings import Strict
from llm_ide.state.operations import OperationNode
from llm_ide.variant import (
    Action,
    ActionResult,
    ActionRun,
    CombinationError,
    Hook,
    Opening,
    PromptParts,
    Variant,
    Variants,
)
from llm_ide.whole_settings import BUNDLED_SECTIONS

# A wrapper that logs every action, after it ran (or was settled without running) and before it is committed


class LogState(TypedDict, total=False):
    action_log: list[dict[str, Any]]


class ActionLog(Variant):
    name = "action_log"
    state = LogState

    def wrap_action(self, ctx: Any, state: dict[str, Any], node: OperationNode, run: ActionRun) -> ActionResult:
        result = run(node)
        entry = {"step": state.get("n_operations", 0), "action": node.action_type, "returncode": result.node.returncode}
        return result.merged({"action_log": [*state.get("action_log", []), entry]})

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"action_log": state.get("action_log", [])}


def test_a_wrapper_that_logs_every_action_plugs_in_around_the_action(tmp_path: Path) -> None:
    result, traj = run(tmp_path, FIX_SCRIPT, [ActionLog()])
    assert result.exit_status == "submitted" and FIXED in result.submission
    logged = [(e["step"], e["action"], e["returncode"]) for e in traj["info"]["action_log"]]
    assert logged == [(0, "view", 0), (1, "bash", 1), (2, "edit", 0), (3, "bash", 0), (4, "submit", 0)]
    assert [op["action_type"] for op in traj["operations"]] == [action for _, action, _ in logged]
    graph = build_graph(variants=Variants((ActionLog(),))).get_graph()
    assert {node for node in graph.nodes if not node.startswith("__")} == {
        "render_context", "reflect", "branch", "act", "execute_tool", "update_activity"
    }  # fmt: skip


def test_the_log_sees_an_action_the_navigator_denied_which_never_ran(tmp_path: Path) -> None:
    driver = [CHEAT, CART_FIX, reflect(False, "fixed"), CART_TESTS, reflect(False, "tests pass"), CART_SUBMIT]
    navigator = [*PLAN, "<deny>Do not change the test; fix Cart.total.</deny>", "<approve>ok</approve>"]
    navigator += ["<approve>ok</approve>"]
    nav = {"mode": "model", "model": write_script(tmp_path / "navigator.yaml", navigator)}
    result, traj = run(tmp_path, driver, [ActionLog()], navigator=nav)
    assert result.exit_status == "submitted"
    logged = [(e["action"], e["returncode"]) for e in traj["info"]["action_log"]]
    assert logged == [("edit", -1), ("edit", 0), ("bash", 0), ("submit", 0)]
    assert traj["operations"][0]["denied"]["by"] == "model" and "1. In Cart.total" in traj["info"]["navigator"]["plan"]


# An action of its own, offered in the action list


def word_count(ctx: Any, state: dict[str, Any], node: OperationNode) -> ActionResult:
    path = node.action_params.get("path")
    if not isinstance(path, str):
        raise ParamError("`path` must name a file")
    text = file_text(ctx.codebase, named_path(ctx.codebase, node.action_params))
    return ActionResult(node).settled(ActionOutcome(f"{path}: {len((text or '').split())} words", 0))


def no_word_count(ctx: Any, params: dict[str, Any]) -> ActionOutcome:
    return ActionOutcome("word_count: not in this run", 2)


class WordCount(Variant):
    name = "word_count"
    actions = {"word_count": Action(word_count, no_word_count)}

    def prompt(self, ctx: Any, state: dict[str, Any]) -> PromptParts:
        return PromptParts(actions='- `<word_count>{"path": "<file>"}</word_count>`: how many words a file holds.')


def test_an_action_of_a_variant_is_offered_parsed_and_run_like_the_core_ones(tmp_path: Path) -> None:
    count = act("How long is the cart?", "word_count", path="shop/cart.py")
    terse = 'And the tests?\n<word_count>{"path": "tests/test_cart.py"}</word_count>'
    bad = act("And nothing?", "word_count", path=3)
    driver = [count, reflect(False, "counted"), terse, reflect(False, "counted"), bad, reflect(True, "no path")]
    result, traj = run(tmp_path, [*driver, act("Done.", "submit")], [WordCount()])
    assert result.exit_status == "submitted"
    first, second, third = traj["operations"][:3]
    words = len(BUGGY_FILES["shop/cart.py"].split())
    assert (first["action_type"], first["observation"]) == ("word_count", f"shop/cart.py: {words} words")
    assert second["observation"].startswith("tests/test_cart.py: ") and second["thought"] == "And the tests?"
    assert (third["returncode"], third["observation"]) == (
        2,
        "Invalid parameters for `word_count`: `path` must name a file",
    )
    assert (
        "`<word_count>" in traj["model_calls"][0]["prompt"]
        and "`<submit></submit>`" in traj["model_calls"][0]["prompt"]
    )


def test_without_the_variant_its_action_is_no_action(tmp_path: Path) -> None:
    count = act("How long is the cart?", "word_count", path="shop/cart.py")
    result, traj = run(tmp_path, [count, count], agent={"max_format_errors": 2})
    assert result.exit_status == "format_error" and traj["operations"] == []
    retry = traj["model_calls"][1]["prompt"]
    assert "unknown action_type 'word_count'; expected one of view, view_symbol, search, edit, create, bash" in retry
    assert "word_count" not in traj["model_calls"][0]["prompt"]


# A phase before the main loop, a script installed beside the tools, run again at submit: the shape of issue 25's
# reproduction


class CheckState(TypedDict, total=False):
    checks: dict[str, Any]


def run_check(ctx: Any) -> dict[str, Any]:
    result = ctx.codebase.env.execute(f"sh {shlex.quote(ctx.resources['check'])}", timeout=60)
    return {"returncode": result.returncode, "output": result.output.strip().splitlines()[-1]}


def check_before(state: dict[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
    if "checks" in state:
        return {}
    return {"checks": {"before": run_check(runtime.context)}}


def check(ctx: Any, state: dict[str, Any], node: OperationNode) -> ActionResult:
    outcome = run_check(ctx)
    return ActionResult(node).settled(ActionOutcome(outcome["output"], outcome["returncode"]))


class Check(Variant):
    name = "check"
    state = CheckState
    actions = {"check": Action(check, no_word_count, bare=True)}

    def nodes(self) -> list[Hook]:
        return [Hook("check_before", check_before, once=True)]

    def open(self, ctx: Any, opening: Opening) -> Any:
        env = ctx.codebase.env
        script = Path(env.private_dir("check")) / "source.sh"
        script.parent.mkdir(parents=True, exist_ok=True)
        tests = f"cd {shlex.quote(env.workdir)} && {TEST_COMMAND}"
        script.write_text(f'out=$({tests}); status=$?; printf "%s\\n" "$out" | tail -n 1; exit $status\n')
        target = f"{env.tools_root}/check.sh"
        env.copy_in(script, target)
        return target

    def prompt(self, ctx: Any, state: dict[str, Any]) -> PromptParts:
        before = state.get("checks", {}).get("before")
        return PromptParts(preface=f"# Check before the first step\n{before['output']}\n" if before else "")

    def wrap_action(self, ctx: Any, state: dict[str, Any], node: OperationNode, run: ActionRun) -> ActionResult:
        result = run(node)
        if not result.submitted:
            return result
        return result.merged({"checks": {**state.get("checks", {}), "after": run_check(ctx)}})

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"facts": {name: check["returncode"] for name, check in state.get("checks", {}).items()}}


def test_a_phase_before_the_loop_a_script_beside_the_tools_and_a_check_again_at_submit(tmp_path: Path) -> None:
    driver = FIX_SCRIPT[4:8] + [act("Check it.", "check"), reflect(False, "passes"), act("Done.", "submit")]
    result, traj = run(tmp_path, driver, [Check()])
    assert result.exit_status == "submitted" and FIXED in result.submission
    assert traj["info"]["facts"] == {"before": 1, "after": 0}
    assert "# Check before the first step\nFAILED (failures=1)\n# Memory" in traj["model_calls"][0]["prompt"]
    check = next(op for op in traj["operations"] if op["action_type"] == "check")
    assert (check["observation"], check["returncode"]) == ("OK", 0)
    assert "check.sh" not in result.submission  # beside the tools, not in the repository
    graph = build_graph(variants=Variants((Check(),))).get_graph()
    assert ("__start__", "check_before") in {(edge.source, edge.target) for edge in graph.edges}


# A variant with a settings section of its own, enabled and set from a config file


class NoteSettings(Strict):
    enabled: bool = False
    text: str = ""


class StepNote(Variant):
    """A note ahead of the memory, from its own section (`step_note:` in a config file)."""

    name = "step_note"
    settings = {"step_note": (NoteSettings, NoteSettings)}

    @classmethod
    def enabled(cls, settings: Any) -> StepNote | None:
        return cls() if settings.step_note.enabled else None

    def prompt(self, ctx: Any, state: dict[str, Any]) -> PromptParts:
        return PromptParts(preface=f"Note: {ctx.settings.step_note.text}\n")


def test_a_variant_of_ones_own_gets_its_settings_from_a_config_file(tmp_path: Path) -> None:
    """Its section validated with the rest (a mistake in it is one line naming the key), enabled and set from the
    file through the Python API; the same file without the variant given is refused, naming the section."""
    (config := tmp_path / "mine.yaml").write_text("step_note:\n  enabled: true\n  text: Mind the tests.\n")
    with pytest.raises(ConfigError, match=r"step_note"):
        load_config("default", [config])
    (bad := tmp_path / "bad.yaml").write_text("step_note:\n  enabled: maybe\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: step_note.enabled"):
        load_config("default", [bad], variants=[StepNote])
    settings = load_config("default", [config], variants=[StepNote], environment={"tools": []})
    assert settings.step_note == NoteSettings(enabled=True, text="Mind the tests.")  # type: ignore[attr-defined]
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    for enabled in (True, False):
        (folder := tmp_path / f"enabled-{enabled}").mkdir()
        result = run_task(
            TASK, model=write_script(folder / "driver.yaml", [act("Done.", "submit")]), output_dir=folder / "out",
            settings=settings.merged({"step_note": {"enabled": enabled}}), run_id="n", repo=repo, variants=[StepNote],
        )  # fmt: skip
        prompt = load_trajectory(result.trajectory_path)["model_calls"][0]["prompt"]
        assert result.exit_status == "submitted" and ("Note: Mind the tests." in prompt) == enabled


def test_the_bundled_variants_sections_are_the_whole_settings_own_and_one_of_ones_own_cannot_take_one() -> None:
    """The whole settings take each bundled variant's section from its settings module (not its behaviour): the
    sections its class declares, in the composition's order; a variant of one's own declaring one is refused."""
    assert tuple(kind.settings for kind in BUNDLED if kind.settings) == BUNDLED_SECTIONS
    assert load_config(variants=[Navigator, Sampling]).navigator.mode == load_config().navigator.mode

    class Taken(Variant):
        name = "taken"
        settings = {"navigator": (NoteSettings, NoteSettings)}

    with pytest.raises(CombinationError, match="^a variant's settings section is taken already: navigator$"):
        load_config(variants=[Taken])


@pytest.mark.parametrize("door", [run_task, run_attempts])
@pytest.mark.parametrize("given", [StepNote, StepNote()])
def test_a_variant_whose_settings_were_not_loaded_is_one_line(tmp_path: Path, door: Any, given: Any) -> None:
    """Settings loaded without the variant's section: an AttributeError from the composition (its class), or a run
    that ended `error` at its first prompt (an instance)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "driver.yaml", [act("Done.", "submit")])
    with pytest.raises(CombinationError) as refused:
        door(TASK, model=model, output_dir=tmp_path / "out", settings=load_config(), run_id="n", repo=repo,
             variants=[given])  # fmt: skip
    assert str(refused.value) == (
        "variant step_note's settings section `step_note` is not in the run's settings: load them with it "
        "(load_config(..., variants=[StepNote]))"
    )
    assert not (tmp_path / "out").exists()


# A variant given twice


def test_a_variant_given_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(CombinationError, match="^a variant is given twice: action_log, action_log$"):
        run(tmp_path, FIX_SCRIPT, [ActionLog(), ActionLog()])
    assert not (tmp_path / "out").exists()  # refused before anything starts


# Facts for the reviewer and the chooser of attempts


class SubmitState(TypedDict, total=False):
    at_submit: int


class SubmitCheck(Variant):
    """Runs a command when the agent submits; its return code is a fact about the run."""

    name = "submit_check"
    state = SubmitState

    def __init__(self, command: str) -> None:
        self.command = command

    def wrap_action(self, ctx: Any, state: dict[str, Any], node: OperationNode, run: ActionRun) -> ActionResult:
        result = run(node)
        if not result.submitted:
            return result
        return result.merged({"at_submit": ctx.codebase.env.execute(self.command, timeout=60).returncode})

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"facts": {"check at submit": state["at_submit"]}} if "at_submit" in state else {}


def test_a_variants_facts_reach_the_reviewer_and_the_chooser_of_attempts(tmp_path: Path) -> None:
    from attempts_scripts import FILES, RIGHT, TASK, TEST, WRONG, attempt_script, choice, review, scripts

    from llm_ide import run_attempts

    reviews = [review(6, "Plausible."), review(6, "Plausible too.")]
    model = scripts(tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)], reviews, [choice(2, "Ok.")])
    settings = load_config("default", environment={"tools": []}, attempts={"max": 2, "accept_score": None})
    result = run_attempts(TASK, model=model, settings=settings, output_dir=tmp_path / "out", run_id="T",
                          repo=make_git_repo(tmp_path / "repo", FILES), variants=[SubmitCheck(TEST)])  # fmt: skip
    assert (result.exit_status, result.chosen) == ("submitted", 2)
    assert [attempt["facts"] for attempt in result.attempts] == [{"check at submit": 1}, {"check at submit": 0}]
    calls = load_trajectory(result.trajectory_path)["model_calls"]
    reviewed = [call["prompt"] for call in calls if call["kind"] == "review"]
    assert ["- check at submit: 1" in reviewed[0], "- check at submit: 0" in reviewed[1]] == [True, True]
    (chooser,) = [call["prompt"] for call in calls if call["kind"] == "choose"]
    assert chooser.count("### Facts (its variants' checks)") == 2 and "- check at submit: 0" in chooser
