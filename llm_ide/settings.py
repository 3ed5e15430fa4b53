"""The typed configuration of the core: its sections of `prompts/default.yaml` (their values are the defaults), the
strict base every section derives from, and the one way YAML settings are read, layered and validated (one line
naming the file and the key on an error). The variants' sections join them at the top (llm_ide/whole_settings.py).
Unknown keys are errors (`extra="forbid"`): a misspelt setting is reported, never ignored."""

from __future__ import annotations

import re
from copy import deepcopy
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from llm_ide.errors import ConfigError
from llm_ide.setting_errors import DockerBytes, Layers, ToolName, describe_error
from llm_ide.templating import parsed

PROMPTS_DIR = Path(__file__).parent / "prompts"
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: the default config in 5 ms, not 70
YAML_MAX_NODES = 100_000  # values a YAML document may hold once its aliases are expanded (the default config: ~600)
MAX_SECONDS = 7 * 24 * 3600  # the longest timeout or time limit a setting may ask for (a week)
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]  # a timeout in seconds
Bytes = Annotated[ByteSize, Field(gt=0)]  # a size limit: 0 would be read as none
Model = TypeVar("Model", bound=BaseModel)


class Strict(BaseModel):
    """Every settings section: unknown keys, and values of the wrong type ("10" for a number), are errors."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, allow_inf_nan=False, strict=True, defer_build=True
    )


TemplateText = Annotated[str, AfterValidator(parsed)]  # a setting that is a Jinja template


class TemplateSet(Strict):
    """A section of Jinja templates: every text in it is one (`parsed`), a tool's description too."""

    @field_validator("*")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        return parsed(value)


class BundledTemplates(TemplateSet):
    """Jinja2 templates whose defaults are a mapping of a YAML file in llm_ide/prompts (`BUNDLED`: the file and the
    key); a template left out keeps its default."""

    BUNDLED: ClassVar[tuple[str, str]]

    @model_validator(mode="before")
    @classmethod
    def with_defaults(cls, data: Any) -> Any:
        name, key = cls.BUNDLED
        return {**bundled_yaml(name)[key], **data} if isinstance(data, dict) else data


class AgentSettings(Strict):
    step_limit: NonNegativeInt  # 0: no limit
    cost_limit: NonNegativeFloat  # 0: no limit
    token_limit: NonNegativeInt | None = None  # input + output tokens; holds whatever the price; 0/None: no limit
    max_reply_chars: PositiveInt | None = None  # a longer reply keeps its head and tail; None: no cap
    wall_time_limit: Annotated[float, Field(ge=0, le=MAX_SECONDS)]  # seconds; 0: no limit
    max_format_errors: PositiveInt
    observation_max_chars: PositiveInt
    view_max_lines: PositiveInt
    search_max_results: PositiveInt
    single_call: bool  # one model call per step: its reply holds the reflection and the next action


class SectionCaps(Strict):
    """Characters each prompt section may hold (head and tail kept): the prompt stays within budget."""

    task: PositiveInt
    tool_usage: PositiveInt
    code_context: PositiveInt
    operation_history: PositiveInt
    lessons: PositiveInt
    files: PositiveInt
    changes: PositiveInt
    latest: PositiveInt


class PriceSettings(Strict):
    """USD per million tokens; a prompt token read from / written to the provider's prompt cache costs `cache_read` /
    `cache_write` (the input price when left out)."""

    input: NonNegativeFloat
    output: NonNegativeFloat
    cache_read: NonNegativeFloat | None = None  # left out: the input price
    cache_write: NonNegativeFloat | None = None


class MemorySettings(Strict):
    alpha: NonNegativeFloat  # the weight of an access in a chunk's score
    beta: NonNegativeFloat  # the weight of a reference
    gamma: float = Field(gt=0, le=1)  # the decay per operation
    threshold: NonNegativeFloat  # a chunk scoring above it is shown
    context_budget_chars: PositiveInt
    whole_file_chars: NonNegativeInt  # the files last read or written whole, shown whole beside the budget (0: none)
    read_through: float = Field(ge=0, le=1)  # a file whose active chunks hold this share of its lines: read through
    history_max: PositiveInt
    history_thought_chars: PositiveInt
    history_params_chars: PositiveInt
    snapshot_every: NonNegativeInt  # 0: renewed by size only
    recent_operations: PositiveInt
    prompt_budget_chars: PositiveInt
    renew_at_chars: PositiveInt
    renew_ratio: PositiveFloat  # a renewal once the re-reads it saves have cost this many times its price
    unpriced: PriceSettings  # the prices a renewal weighs for a model `model.prices` gives none (or a free one)
    overspend: NonNegativeFloat  # how far above full history's bill so far a renewal may take the memory's (a share)
    section_max_chars: SectionCaps


class EnvironmentMessages(TemplateSet):
    elided: str
    timed_out: str
    session_lost: str


class LimitSettings(Strict):
    """What one local command may use (environments/limits.py); None: no limit."""

    processes: PositiveInt | None  # its processes and threads together (a cgroup, as root; else per user: RLIMIT_NPROC)
    file_size: Bytes | None  # the largest file it may write ("4GiB", "100m")
    memory: Bytes | None  # its processes together (a cgroup, as root; else each process: RLIMIT_DATA)
    cpu_seconds: PositiveInt | None  # CPU time of each of its processes


class EnvironmentSettings(Strict):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, coerce_numbers_to_str=True)

    type: Literal["local", "docker"]
    command_timeout: Seconds
    output_max_bytes: PositiveInt
    image: str | None
    workdir: str
    conda_env: str | None
    network: str | None
    cpus: PositiveFloat | None
    memory: DockerBytes | None  # docker's mem_limit: bytes or "512m", "2g"
    pids_limit: PositiveInt | None  # docker: processes and threads in the container
    user: str = "auto"  # docker: the commands' user; auto: the image's own (root when it declares none)
    cap_add: list[str] = []  # docker: the capabilities root keeps in the container; every other one is dropped
    no_new_privileges: bool = True  # docker: a setuid program gains no privilege
    sandbox: Literal["bwrap", "none"]  # local: bubblewrap around every command when installed
    writable: list[str]  # local: paths the sandboxed commands may write besides the repository and the tools
    readable: list[str]  # local with bwrap: paths shown read-only in the hidden folders (the home directory)
    mount_at: str | None = None  # local with bwrap: the path at which the commands see the repository
    sockets: list[str] = []  # local with bwrap: host Unix sockets the commands may connect to (every other: none)
    limits: LimitSettings  # local: what one command may use
    scrub_history: Literal["auto", "always", "never"]  # what came after the base commit removed (workspace/history.py)
    require_repository: bool = False  # a workdir that is no git repository with a commit: an environment_error
    env: dict[str, Annotated[str, Field(strict=False)]]  # a number is its text (OMP_NUM_THREADS: 1)
    pull: Literal["missing", "never"]
    messages: EnvironmentMessages
    tools: list[ToolName]


class ModelSettings(Strict):
    timeout: Seconds  # seconds a request may go without producing (streamed) or without its whole reply (not)
    max_tokens: PositiveInt | None = None  # the room for each reply; None: 4096 at an endpoint given by URL, else none
    check_name: bool = True  # an OpenAI-compatible endpoint that lists its models (/v1/models) must list the name
    max_retries: NonNegativeInt
    retry_base_delay: Annotated[float, Field(ge=0, le=MAX_SECONDS)]
    retry_max_delay: Annotated[float, Field(ge=0, le=MAX_SECONDS)]
    temperature: Annotated[float, Field(ge=0, le=2)] | None  # None: the provider's default
    kwargs: dict[str, Any]
    prices: dict[str, PriceSettings]
    cache_hints: bool
    stream: bool | Literal["auto"] = "auto"  # replies as streams: always, never, auto: when a listener watches
    action_format: Literal["auto", "tools", "text"] = "auto"  # the actions as the provider's tools, or in the text


class CheckpointSettings(Strict):
    keep_history: bool
    prune_every: NonNegativeInt


class ObservationTemplates(TemplateSet):
    view: str
    view_missing: str
    view_symbol: str
    view_symbol_missing: str
    search: str
    search_none: str
    search_bad_pattern: str
    search_missing: str
    edit: str
    edit_no_match: str
    edit_many_matches: str
    create: str
    create_exists: str
    bash: str
    submit: str
    bad_params: str
    outside_repository: str
    unknown_action: str
    interrupted: str
    rerun: str
    already_applied: str


class ToolFormatTemplates(TemplateSet):
    """The templates of the same names in a run whose actions are tools (`model.action_format`)."""

    actions: str
    single_format: str
    act_format: str
    format_error: str
    action_turn: str  # the text of the reply that made an operation (the call follows it)
    action_written: str  # an action as a worked example shows it (a call)
    observation_turn: str  # the tool's result (the instruction follows it as the user's text)


class Templates(TemplateSet):
    """Jinja2 prompt templates (their text lives in the YAML)."""

    system: str
    task: str
    code_context_empty: str
    operation: str
    rows_in_context: str
    operation_brief: str
    operations_omitted: str
    operation_history_empty: str
    lessons_empty: str
    tool_usage_empty: str
    snapshot: str
    memory_base: str
    memory_since: str
    change_undone: str
    actions: str
    action_written: str  # an action as a worked example shows it (its tag)
    reflect: str
    action_turn: str
    observation_turn: str
    next_step: str
    alternative_action: str
    single_step: str
    reflection: str
    format_error: str
    reflect_format: str
    single_format: str
    act_format: str
    truncated: str
    choices: str  # the trajectory's record of one request that returned several replies (the provider's `n`)
    observations: ObservationTemplates
    tool_format: ToolFormatTemplates
    tools: dict[str, dict[str, Any]]  # the core's actions as tools: the JSON schema of each one's parameters

    @cached_property
    def with_tools(self) -> Templates:
        """These templates for a run whose actions are tools."""
        return self.model_copy(update=self.tool_format.model_dump())


class PatchSettings(Strict):
    max_new_file_bytes: PositiveInt
    artefacts: list[str]


class SweBenchSettings(Strict):
    eval_timeout: Seconds
    eval_script: TemplateText


class CoreSettings(Strict):
    """The core's sections of a run's configuration."""

    agent: AgentSettings
    memory: MemorySettings
    environment: EnvironmentSettings
    model: ModelSettings
    checkpoint: CheckpointSettings
    templates: Templates
    patch: PatchSettings
    swebench: SweBenchSettings | None = None  # only in the `swebench` config
    secrets: list[str] = []  # names (environment variables, `environment.env` keys, headers) whose values are secret

    def merged(self, values: dict[str, Any], origin: str = "settings") -> Any:
        """A copy with `values` (nested like the YAML) deep-merged in, validated; errors name `origin`."""
        return validate(type(self), [(origin, self.model_dump(mode="python")), (origin, values)])


class ConfigLoader(SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The settings' YAML: `1e9` and `1.0e12` are numbers, as in YAML 1.2 (PyYAML's YAML 1.1 reads them as text); a
    key given twice in one mapping is an error (PyYAML keeps the last; a merged `<<:` key may be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = None if key_node.tag == "tag:yaml.org,2002:merge" else self.construct_object(key_node, deep=True)
            if key is not None and key in seen:
                raise yaml.YAMLError(f"the key {key!r} is given twice (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep)


EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789."))


class YamlTooLarge(yaml.YAMLError):
    """A document whose aliases expand beyond YAML_MAX_NODES values (an "alias bomb"): every reader of it would."""


def load_yaml(text: str, loader: Any = SAFE_LOADER) -> Any:
    """The one way a YAML file is read: a safe loader (no python tags), and aliases expanded within YAML_MAX_NODES
    values. The loader shares an alias's value instead of copying it, so loading a bomb is cheap; merging, validating
    or printing it is not: it is measured here, stopping at the limit."""
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader, or one derived from it)
    except (ValueError, TypeError, OverflowError) as error:  # `!!int x`: the tag's constructor raises Python's own
        raise yaml.YAMLError(f"a value its tag cannot make: {error}") from None
    stack, count = [data], 0
    while stack:
        value = stack.pop()
        count += 1
        if count > YAML_MAX_NODES:
            raise YamlTooLarge(f"its aliases expand to more than {YAML_MAX_NODES:,} values")
        if isinstance(value, dict):
            stack += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            stack += value
    return data


@lru_cache(maxsize=32)  # a config's text parsed once per process: a test run loads the bundled ones hundreds of times
def parsed_config(text: str) -> Any:
    return load_yaml(text, ConfigLoader)


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping; every problem with the file is a ConfigError naming it."""
    try:
        data = deepcopy(parsed_config(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    except YamlTooLarge as error:
        raise ConfigError(f"{path}: refused: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict | None):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data or {}


@cache
def bundled_yaml(name: str) -> dict[str, Any]:
    """One of the YAML files shipped in llm_ide/prompts, read once (callers copy what they change)."""
    return read_yaml(PROMPTS_DIR / name)


def deep_merge(base: dict[str, Any], override: dict[str, Any], copy: bool = True) -> dict[str, Any]:
    """`override` merged into a copy of `base` (into `base` itself unless `copy`), sharing none of its values."""
    merged = deepcopy(base) if copy else base
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            deep_merge(merged[key], value, copy=False)
        else:
            merged[key] = deepcopy(value)
    return merged


def validate(schema: type[Model], layers: Layers) -> Model:
    """The layers deep-merged in order, validated as `schema`; an error: one ConfigError line naming the key's layer."""
    merged: dict[str, Any] = {}
    for _, data in layers:
        deep_merge(merged, data, copy=False)
    try:
        return schema.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(describe_error(error, layers, schema)) from None
