"""A run as the Python API asks for it (`run_task`, `run_attempts`): its fields, each checked for its type (a path may
be text), then the preflight the command line makes (llm_ide/run/preflight.py); a problem is a UsageError of one
line, before anything is set up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from dataclasses import fields as members
from pathlib import Path
from typing import Any

from llm_ide.budget import Budget
from llm_ide.composition import compose
from llm_ide.environments import capabilities
from llm_ide.errors import UsageError
from llm_ide.inputs import API, Names
from llm_ide.keep import Keep
from llm_ide.kills import IntentLog
from llm_ide.run.checkpoint import check_store
from llm_ide.run.preflight import preflight
from llm_ide.run.usage import check_output_folder, imaged_environment, refuse_a_json_name
from llm_ide.settings import AgentSettings, CoreSettings
from llm_ide.variant import Variant


@dataclass(frozen=True)
class RunRequest:
    """A run at a task: the task, model and settings, where its outputs (and, unless `checkpoint` names another
    store, its checkpoints) go, the repository or image it works on, the budget it shares, and the variants given
    beside those its settings ask for. `resume`: the answer to the question a run awaits (a person's)."""

    task: str
    model: str
    settings: CoreSettings
    output_dir: Path
    run_id: str
    repo: Path | None = None
    environment: str | None = None
    image: str | None = None
    base_url: str | None = None
    checkpoint: str | None = None
    task_vars: dict[str, Any] | None = None
    cost_budget: Budget | None = None
    variants: tuple[Variant | type[Variant], ...] = ()  # a class of one's own: there when the settings enable it
    carried_lessons: tuple[str, ...] = ()  # lessons learnt before this run (an earlier attempt's), shown first
    intents: IntentLog | None = None  # where started operations are recorded (default: a file in the output folder)
    keep: Keep | None = None  # where its models keep what they need across processes (default: the output folder)
    resume: Any = None


TYPES = (
    *((name, str, "text") for name in ("task", "model", "run_id")),
    *((name, str | None, "text") for name in ("base_url", "environment", "image", "checkpoint")),
    ("settings", CoreSettings, "settings (load_config(...))"),
    ("output_dir", str | os.PathLike, "a path"),
    ("repo", str | os.PathLike | None, "a path"),
    ("task_vars", Mapping | None, "a mapping of names to values"),
    ("cost_budget", Budget | None, "a shared budget (CostBudget)"),
    ("variants", list | tuple, "a list of variants (Variant classes or instances)"),
    ("carried_lessons", list | tuple, "a list of texts"),
)


def is_variant(value: Any) -> bool:
    return isinstance(value, Variant) or (isinstance(value, type) and issubclass(value, Variant))


NEEDED = {"settings": " (settings=load_config(): `from llm_ide import load_config`, the default config)"}
LISTENERS = ("on_event", "on_model_call", "ask", "on_command")  # run_task's and run_attempts' own arguments


def check_listeners(listeners: dict[str, Any]) -> None:
    """The Python API's listeners (LISTENERS): each a callable or None; another value is a UsageError saying which."""
    wrong = [
        f"`{name}` must be a function (a callable), not {type(value).__name__} {value!r:.60}"
        for name, value in listeners.items()
        if value is not None and not callable(value)
    ]
    if wrong:
        raise UsageError(f"the run's {'; '.join(wrong)}")


def request_of(task: Any, given: dict[str, Any]) -> RunRequest:
    """The Python API's run: `given` the fields of RunRequest; one missing, unknown or of another type is a UsageError
    saying which (paths may be text)."""
    names = [item.name for item in members(RunRequest)]
    if unknown := [name for name in given if name not in names]:
        settings = [name for name in unknown if name in AgentSettings.model_fields]
        hint = f" ({settings[0]} is a setting: load_config(agent={{{settings[0]!r}: ...}}))" if settings else ""
        raise UsageError(
            f"the run takes no argument {', '.join(unknown)}{hint}; it takes {', '.join([*names[1:], *LISTENERS])}"
        )
    required = [item.name for item in members(RunRequest) if item.default is MISSING and item.name != "task"]
    if missing := [name for name in required if name not in given]:
        raise UsageError(f"the run needs {', '.join(name + NEEDED.get(name, '') for name in missing)}")
    values = {"variants": (), **given, "task": task, "carried_lessons": given.get("carried_lessons") or ()}
    wrong = [
        f"`{name}` must be {said}, not {type(value).__name__} {value!r:.60}"
        for name, kind, said in TYPES
        if name in values and not isinstance(value := values[name], kind)
    ]
    if not wrong:
        strays = [value for value in values["variants"] if not is_variant(value)]
        wrong = [f"`variants` holds {value!r:.60}, which is no Variant" for value in strays[:1]]
    if wrong:
        raise UsageError(f"the run's {'; '.join(wrong)}")
    paths = {name: Path(values[name]) for name in ("output_dir", "repo") if values.get(name) is not None}
    refuse_a_json_name(paths["output_dir"], values["run_id"], "`output_dir`")
    variants, lessons = tuple(values.pop("variants")), tuple(map(str, values.pop("carried_lessons")))
    values["environment"] = imaged_environment(values.get("environment"), values.get("image"))
    return RunRequest(**{**values, **paths, "variants": variants, "carried_lessons": lessons})


def check_request(request: RunRequest, names: Names = API, attempted: bool | None = None) -> None:
    """The preflight of a run the Python API (or a Studio graph: `names`, what its input calls each of them) is given:
    its task, limits, repository, model and what its variants need (llm_ide/run/preflight.py), as the command line
    checks its own."""
    variants = compose(request.settings, request.variants)
    check_output_folder(request.output_dir, request.repo, names.output)
    if request.checkpoint is not None:
        check_store(request.checkpoint, names.checkpoint)
    kind = request.environment or request.settings.environment.type
    if request.repo is None and not capabilities(kind).ephemeral:  # (it runs in the repository itself)
        raise UsageError(f"a run in the {kind} environment needs a repository ({names.repo})")
    preflight(
        request.model,
        request.settings,
        base_url=request.base_url,
        repo=request.repo,
        task=request.task,
        variants=variants,
        environment=request.environment,
        image=request.image,
        attempted=attempted,
        names=names,
    )
