from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from llm_ide.errors import UsageError
from llm_ide.settings import Strict, load_yaml
from llm_ide.templating import syntax_error

TOOLS_DIR = Path(__file__).parent
KEYS = (
    "tool_name",
    "version",
    "source",
    "py_standalone",
    "installation",
    "check_script",
    "setup_script",
    "executable",
    "usage",
)
SUPPORTED_INSTALLATIONS = ("pip",)


class ToolConfigError(UsageError, ValueError):
    pass


class _ToolYamlLoader(yaml.SafeLoader):
    """SafeLoader without implicit floats: `py_standalone: 3.10` stays the string "3.10" (not the number 3.1)."""


_ToolYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class ToolConfig(Strict):
    """One `llm_ide/tools/<tool_name>.yaml` (SPEC §9); `source` is resolved to an absolute folder."""

    model_config = ConfigDict(**Strict.model_config, frozen=True)

    tool_name: str
    version: str | None
    source: Annotated[Path, Field(strict=False)] | None  # a folder's path: YAML's text
    py_standalone: str | None
    installation: Literal["pip"]
    # optional, ours (not SPEC §9's): commands that show the installed tool runs, whatever the run; a local run
    # taking the tool from the cache runs them once per cache entry and kind of environment (tools/checked.py)
    check_script: str | None = None
    setup_script: str | None
    executable: str
    usage: str

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("tool_name")
    @classmethod
    def _tool_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
            raise ValueError(f"{value!r} is not a valid tool name (letters, digits, '_', '.', '-')")
        return value

    @field_validator("py_standalone")
    @classmethod
    def _python_version(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"\d+(\.\d+){0,2}", value):
            raise ValueError(f"{value!r} is not a Python version (e.g. '3.11')")
        return value

    @field_validator("source")
    @classmethod
    def _source_folder(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        base = Path((info.context or {}).get("base_dir", "."))
        folder = (base / value.expanduser()).resolve()
        if not folder.is_dir():
            raise ValueError(f"folder not found: {folder}")
        return folder

    @field_validator("executable")
    @classmethod
    def _executable(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("check_script", "setup_script", "usage")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None and (why := syntax_error(value)):
            raise ValueError(f"not a template Jinja can parse: {why}")
        return value

    @model_validator(mode="after")
    def _version_or_source(self) -> ToolConfig:
        if self.source is None and not self.version:
            raise ValueError("`version` is required when `source` is null (pip installs <tool_name>==<version>)")
        return self

    @property
    def first_usage_line(self) -> str:
        return next((line.strip() for line in self.usage.splitlines() if line.strip()), "")


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown key `{key}` (allowed keys: {', '.join(KEYS)})"
    if kind == "missing":
        return f"missing key `{key}`"
    if kind == "literal_error" and key == "installation":
        supported = ", ".join(SUPPORTED_INSTALLATIONS)
        return f"key `installation`: unsupported value {error['input']!r} (supported: {supported})"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"key `{key}`: {message}" if key else message


def parse_tool_config(data: Any, path: Path) -> ToolConfig:
    if not isinstance(data, dict):
        raise ToolConfigError(f"{path}: expected a mapping with the keys {', '.join(KEYS)}")
    try:
        config = ToolConfig.model_validate(data, context={"base_dir": path.parent})
    except ValidationError as error:
        problems = [_describe(item) for item in error.errors()]
        raise ToolConfigError(f"{path}: " + "; ".join(problems)) from None
    if config.tool_name != path.stem:
        raise ToolConfigError(
            f"{path}: key `tool_name`: {config.tool_name!r} does not match the file name {path.name!r}"
        )
    return config


def load_tool_config(path: Path) -> ToolConfig:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), _ToolYamlLoader)
    except FileNotFoundError:
        raise ToolConfigError(f"{path}: tool config not found") from None
    except yaml.YAMLError as error:
        raise ToolConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    return parse_tool_config(data, path)


def available_tools(tools_dir: Path = TOOLS_DIR) -> list[str]:
    return sorted(path.stem for path in Path(tools_dir).glob("*.yaml"))


def tool_config_path(name: str, tools_dir: Path = TOOLS_DIR) -> Path:
    """A tool by name (`<tools_dir>/<name>.yaml`) or a path to a tool yaml."""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return Path(name)
    path = Path(tools_dir) / f"{name}.yaml"
    if not path.exists():
        raise ToolConfigError(
            f"unknown tool {name!r}: {path} not found (available: {', '.join(available_tools(tools_dir))})"
        )
    return path


def load_tools(names: list[str], tools_dir: Path = TOOLS_DIR) -> list[ToolConfig]:
    configs = [load_tool_config(tool_config_path(name, tools_dir)) for name in names]
    seen: set[str] = set()
    for config in configs:
        if config.tool_name in seen:
            raise ToolConfigError(f"tool {config.tool_name!r} is listed twice")
        seen.add(config.tool_name)
    return configs
