from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from in_process import invoke

from llm_ide.config import ConfigError, Settings, load_config, with_user_config


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agent:\n  step_limt: 5\n", "agent.step_limt: unknown setting (did you mean step_limit?)"),
        ("memroy:\n  alpha: 2\n", "memroy: unknown setting (did you mean memory?)"),
        ("agent:\n  zzz: 5\n", "agent.zzz: unknown setting"),
        (
            'agent:\n  max_format_errors: "three"\n',
            "agent.max_format_errors: input should be a valid integer (got 'three')",
        ),
        ("agent:\n  step_limit: -1\n", "agent.step_limit: input should be greater than or equal to 0 (got -1)"),
        ("memory:\n  gamma: 1.5\n", "memory.gamma: input should be less than or equal to 1 (got 1.5)"),
        ("memory:\n  alpha: -1\n", "memory.alpha: input should be greater than or equal to 0 (got -1)"),
        ("memory:\n  beta: -0.5\n", "memory.beta: input should be greater than or equal to 0 (got -0.5)"),
        ("memory:\n  threshold: -3\n", "memory.threshold: input should be greater than or equal to 0 (got -3)"),
        ("model:\n  temperature: -1\n", "model.temperature: input should be greater than or equal to 0 (got -1)"),
        ("model:\n  temperature: 7\n", "model.temperature: input should be less than or equal to 2 (got 7)"),
        ("environment:\n  limits: {file_size: 0}\n", "environment.limits.file_size: input should be greater than 0"),
        ("environment:\n  limits: {memory: 0}\n", "environment.limits.memory: input should be greater than 0"),
        ("environment:\n  memory: -5g\n", "environment.memory: input should be a size above 0: bytes, or a number"),
        ("environment:\n  memory: '0'\n", "environment.memory: input should be a size above 0: bytes, or a number"),
        ("environment:\n  memory: lots\n", "environment.memory: input should be a size above 0: bytes, or a number"),
        ("attempts:\n  accept_score: 11\n", "attempts.accept_score: input should be less than or equal to 10 (got 11)"),
        ("environment:\n  type: kube\n", "environment.type: input should be 'local' or 'docker' (got 'kube')"),
        ("environment:\n  tools: debugger\n", "environment.tools: input should be a valid list (got 'debugger')"),
        ("environment:\n  tools: [navigatr]\n", "environment.tools.0: unknown tool (did you mean navigator?;"),
        (
            "environment:\n  tools: [debugger, zzz]\n",
            "environment.tools.1: unknown tool (the tools: debugger, navigator,",
        ),
        ("model:\n  prices:\n    my-model: {input: 1}\n", "model.prices.my-model.output: missing setting"),
        (
            "model:\n  prices:\n    my-model: {input: 1, output: 2, cache: 3}\n",
            "model.prices.my-model.cache: unknown setting (did you mean cache_read?)",
        ),
        (
            "templates:\n  observations:\n    veiw: x\n",
            "templates.observations.veiw: unknown setting (did you mean view?)",
        ),
        (
            "checkpoint: null\n",
            "checkpoint: input should be a section: a mapping of keep_history, prune_every (got None)",
        ),
        (
            "reproduction:\n  markers: Issue\n",
            "reproduction.markers: input should be a section: a mapping of reproduced, resolved, other (got 'Issue')",
        ),
        (
            "reproduction:\n  markers: {other: Issue resolved}\n",
            "reproduction.markers: the markers must differ: one line cannot say two verdicts (got {'reproduced': ",
        ),
        ("memory: [1]\n", "memory: input should be a section: a mapping of alpha, beta, gamma, threshold, "),
        (
            "model:\n  prices:\n    my-model: 3\n",
            "model.prices.my-model: input should be a section: a mapping of input, output, cache_read, cache_write "
            "(got 3)",
        ),
        (
            "model:\n  prices:\n    my-model: {input: 1, outpt: 2}\n",
            "model.prices.my-model.outpt: unknown setting (did you mean output?) (and 1 more error)",
        ),
        ("extends: swebench\n", "extends: only a base config may extend another"),
        ("agent: [1, 2\n", "not valid YAML"),
        ("agent:\n  step_limit: 3\n  step_limit: 5\n", "not valid YAML: the key 'step_limit' is given twice (line 3)"),
        ("agent: {}\nmodel: {}\nagent: {step_limit: 1}\n", "not valid YAML: the key 'agent' is given twice (line 3)"),
        ("- agent\n", "expected a mapping at the top level, got list"),
    ],
)
def test_a_bad_override_file_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    bad = write(tmp_path / "config.yaml", text)
    good = write(tmp_path / "good.yaml", "patch:\n  max_new_file_bytes: 7\n")
    with pytest.raises(ConfigError) as error:
        load_config("default", [good, bad, good])
    assert str(error.value).startswith(f"{bad}: ")
    assert str(error.value).removeprefix(f"{bad}: ").startswith(message) and "\n" not in str(error.value)
    assert "did you mean" in message or "did you mean" not in str(error.value)


@pytest.mark.parametrize(
    ("key", "took_its_place", "now"),
    [
        ("memory.cached_price", "model.prices.<model>.cache_read", {"memory": {"unpriced": {"cache_read": 0.1}}}),
        ("memory.history_recent", "memory.history_max", {"memory": {"history_max": 5}}),
        ("templates.rows_shown_above", "templates.rows_in_context", {"templates": {"rows_in_context": "x"}}),
        (
            "templates.observations.navigator_off",
            "navigator.templates.absent",
            {"navigator": {"templates": {"absent": "x"}}},
        ),
    ],
)
def test_a_setting_of_an_earlier_version_names_the_one_that_took_its_place(
    tmp_path: Path, key: str, took_its_place: str, now: dict[str, Any]
) -> None:
    """A config file written for an earlier version: `unknown setting` alone (or a guess at a name that does something
    else) left its reader to find in the history where the setting went."""
    *sections, name = key.split(".")
    text = "".join(f"{'  ' * depth}{section}:\n" for depth, section in enumerate(sections))
    old = write(tmp_path / "old.yaml", f"{text}{'  ' * len(sections)}{name}: 1\n")
    with pytest.raises(ConfigError) as error:
        load_config("default", [old])
    message = str(error.value)
    assert message.startswith(f"{old}: {key}: a setting of an earlier version: ") and "\n" not in message
    assert f" {took_its_place} " in message and message.endswith(" took its place") and "did you mean" not in message
    assert load_config("default", **now)  # what took its place is a setting of this version


@pytest.mark.parametrize(
    ("base", "text", "message"),
    [
        (
            "default",
            "templates:\n  operation: '{% if node %}x'\n",
            "templates.operation: not a template Jinja can parse: Unexpected end of template. Jinja was looking for "
            "the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'. "
            "(line 1)",
        ),
        (
            "default",
            "templates:\n  observations:\n    bash: |\n      ok\n      {{ output | nosuch }}\n",
            "templates.observations.bash: not a template Jinja can parse: no filter named 'nosuch' (line 2)",
        ),
        (
            "default",
            "templates:\n  tool_format:\n    actions: '{% for %}'\n",
            "templates.tool_format.actions: not a template Jinja can parse: Expected an expression, got 'end of "
            "statement block' (line 1)",
        ),
        (
            "default",
            "templates:\n  tools:\n    bash:\n      description: '{% for %}'\n",
            "templates.tools: bash.description: not a template Jinja can parse: Expected an expression, got 'end of "
            "statement block' (line 1)",
        ),
        (
            "default",
            "sampling:\n  templates:\n    candidate: '{% if a is nosuch %}{% endif %}'\n",
            "sampling.templates.candidate: not a template Jinja can parse: no test named 'nosuch' (line 1)",
        ),
        (
            "default",
            "environment:\n  messages:\n    timed_out: 'after {{ timeout s'\n",
            "environment.messages.timed_out: not a template Jinja can parse: expected token 'end of print statement', "
            "got 's' (line 1)",
        ),
        (
            "swebench",
            "swebench:\n  eval_script: '{{ x'\n",
            "swebench.eval_script: not a template Jinja can parse: unexpected end of template, expected 'end of print "
            "statement'. (line 1)",
        ),
    ],
)
def test_a_template_jinja_cannot_parse_is_refused_with_the_settings(
    tmp_path: Path, base: str, text: str, message: str
) -> None:
    bad = write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError) as error:
        load_config(base, [bad])
    assert str(error.value) == f"{bad}: {message}"


def test_the_error_names_the_file_in_an_extends_chain_that_set_the_key(tmp_path: Path) -> None:
    base = write(tmp_path / "base.yaml", "extends: swebench\nagent:\n  wall_time_limit: soon\n")
    top = write(tmp_path / "top.yaml", "extends: base.yaml\nagent:\n  step_limit: 3\n")
    with pytest.raises(ConfigError, match=rf"^{base}: agent.wall_time_limit: input should be a valid number"):
        load_config(top)
    fixed = write(tmp_path / "base.yaml", "extends: swebench\nagent:\n  wall_time_limit: 60\n")
    settings = load_config(top)
    assert (settings.agent.step_limit, settings.agent.wall_time_limit, fixed.exists()) == (3, 60.0, True)
    assert settings.environment.type == "docker" and settings.swebench is not None


def test_several_errors_are_counted_on_the_same_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "c.yaml", "agent:\n  step_limt: 5\n  cost_limit: lots\nmemroy: {}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: agent\.cost_limit: .* \(and 2 more errors\)$"):
        load_config("default", [bad])


def test_values_of_the_python_api_are_validated_and_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^settings: agent\.step_limt: unknown setting \(did you mean step_limit\?\)$"
    ):
        load_config("default", agent={"step_limt": 3})
    settings = load_config("default", agent={"step_limit": 3})
    with pytest.raises(ConfigError, match=r"^command line: agent\.cost_limit: input should be a valid number"):
        settings.merged({"agent": {"cost_limit": "much"}}, origin="command line")
    assert settings.merged({"agent": {"cost_limit": 1}}).agent.cost_limit == 1.0 and settings.agent.cost_limit == 3.0
    tools = ["debugger", "navigator", "mine/tool.yaml", "other.yml"]  # shipped names and tool yamls' paths
    assert load_config("default", environment={"tools": tools}).environment.tools == tools
    with pytest.raises(ConfigError, match=r"^settings: environment\.tools\.0: unknown tool \(did you mean debugger\?"):
        load_config("default", environment={"tools": ["debuger"]})


@pytest.mark.parametrize(
    ("section", "values", "read"),
    [
        ("environment", {"memory": 536870912}, {"memory": "536870912"}),  # bytes: was "input should be a valid string"
        ("environment", {"memory": "1.5GB"}, {"memory": "1.5GB"}),
        ("environment", {"memory": None}, {"memory": None}),
        ("memory", {"alpha": 0, "beta": 2.5, "threshold": 0}, {"alpha": 0.0, "beta": 2.5, "threshold": 0.0}),
        ("model", {"temperature": 0}, {"temperature": 0.0}),
        ("model", {"temperature": 2}, {"temperature": 2.0}),
    ],
)
def test_the_ends_of_a_range_are_taken(section: str, values: dict[str, Any], read: dict[str, Any]) -> None:
    taken = getattr(load_config("default", **{section: values}), section)
    assert {key: getattr(taken, key) for key in read} == read


@pytest.mark.parametrize("given", [lambda path: [path], lambda path: path, str, lambda path: [str(path)]])
def test_override_files_are_a_list_or_one_file(tmp_path: Path, given: Callable[[Path], Any]) -> None:
    """`load_config("default", Path("x.yaml"))` is the one file, as `[Path("x.yaml")]` (a bare path was iterated)."""
    (override := tmp_path / "x.yaml").write_text("agent: {step_limit: 7}\n")
    settings = load_config("default", given(override), agent={"cost_limit": 1})
    assert (settings.agent.step_limit, settings.agent.cost_limit) == (7, 1.0)
    with pytest.raises(ConfigError, match=f"^config file not found: {tmp_path}/y.yaml"):
        load_config("default", given(tmp_path / "y.yaml"))


def test_every_bundled_config_validates_and_unknown_names_are_refused() -> None:
    default, swebench = load_config("default"), load_config("swebench")
    assert isinstance(default, Settings) and default.swebench is None
    assert swebench.agent.step_limit == 250 and swebench.templates.task != default.templates.task
    with pytest.raises(ConfigError, match=r"config not found: tools \(neither a file nor one of"):
        load_config("tools")


def test_the_settings_schema_has_no_key_the_default_yaml_lacks() -> None:
    """The YAML holds every default: a model field without one would make every config invalid."""
    dumped = load_config("default").model_dump()

    def keys(model: type, prefix: str = "") -> set[str]:
        found = set()
        for name, field in model.model_fields.items():
            inner = field.annotation
            found.add(prefix + name)
            if isinstance(inner, type) and hasattr(inner, "model_fields"):
                found |= keys(inner, f"{prefix}{name}.")
        return found

    def present(data: dict, prefix: str = "") -> set[str]:
        found = set()
        for name, value in data.items():
            found.add(prefix + name)
            if isinstance(value, dict) and name not in {"env", "kwargs", "prices", "tools"}:  # tools: JSON schemas
                found |= present(value, f"{prefix}{name}.")
        return found

    assert keys(Settings) - {"swebench"} == present(dumped) - {"swebench"}


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=tmp_path)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("run", "error: config.yaml: agent.max_format_errors: input should be a valid integer"),
        ("swebench", "error: config.yaml: agent.max_format_errors: input should be a valid integer"),
        ("evaluate", "error: config.yaml: agent.max_format_errors: input should be a valid integer"),
    ],
)
def test_the_cli_reports_a_bad_config_in_one_line_with_exit_code_2(tmp_path: Path, command: str, message: str) -> None:
    write(tmp_path / "config.yaml", 'agent:\n  max_format_errors: "three"\n')
    (tmp_path / "repo").mkdir()
    args = {
        "run": ["run", "--repo", "repo", "--task", "t", "--model", "scripted:none.yaml", "--config", "config.yaml"],
        "swebench": ["swebench", "--model", "scripted:none.yaml", "--config", "config.yaml", "-o", "out"],
        "evaluate": ["evaluate", "preds.json", "--config", "config.yaml"],
    }[command]
    result = run_cli(tmp_path, *args)
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines), lines[0].startswith(message)) == (2, 1, True), result.stderr
    assert "Traceback" not in result.stderr + result.stdout and "got 'three'" in result.stderr


@pytest.mark.parametrize("given", ["over", "path", "list", "none"])
def test_with_user_config_gives_the_command_lines_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """docs/configuration.md: `load_config("default", with_user_config(...))`, a file given as text, a Path or in a
    list (text was taken a character at a time: `config file not found: o`)."""
    user = write(tmp_path / "user.yaml", "agent: {cost_limit: 1.0, step_limit: 7}\n")
    over = write(tmp_path / "over.yaml", "agent: {step_limit: 9}\n")
    monkeypatch.setenv("LLM_IDE_CONFIG", str(user))
    overrides = {"over": str(over), "path": over, "list": [str(over)], "none": None}[given]
    files = with_user_config(overrides)
    assert files == [user, *([over] if overrides else [])]
    settings = load_config("default", files)
    assert (settings.agent.cost_limit, settings.agent.step_limit) == (1.0, 9 if overrides else 7)


@pytest.mark.parametrize(
    ("section", "key"), [("attempts", "review"), ("sampling", "pairwise"), ("reproduction", "write")]
)
def test_one_template_of_a_variant_is_overridden_alone(tmp_path: Path, section: str, key: str) -> None:
    """`<section>.templates` takes any of its templates; the others keep the bundled prompts (each page says so)."""
    bundled = getattr(load_config("default"), section).templates
    assert key in type(bundled).model_fields
    mine = load_config("default", write(tmp_path / "mine.yaml", f"{section}:\n  templates:\n    {key}: mine\n"))
    templates = getattr(mine, section).templates
    assert templates == bundled.model_copy(update={key: "mine"})
