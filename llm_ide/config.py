"""The configuration of a run: a bundled config (`default`, `swebench`) or a file, its `extends` chain, the user's
config file and the override files, validated once as the whole settings (the core's sections and every bundled
variant's: llm_ide/whole_settings.py). Loading has no side effect: the runner registers the secrets the settings
hold."""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from llm_ide.credentials import mark_secret_names, secrets_in
from llm_ide.errors import ConfigError
from llm_ide.secrets import register
from llm_ide.settings import (
    PROMPTS_DIR,
    BundledTemplates,
    CoreSettings,
    Layers,
    deep_merge,
    parsed_config,
    read_yaml,
    validate,
)
from llm_ide.user_config import USER_CONFIG_VARIABLE, default_user_config, user_config_path
from llm_ide.whole_settings import Settings, kinds_of, settings_class

CONFIG_NAMES = ("default", "swebench")
PATH_LISTS = ("readable", "writable", "sockets")  # environment's: a file's relative paths are relative to its folder
Overrides = list[str | Path] | str | Path | None  # override files in order (or one)

__all__ = [
    "PROMPTS_DIR",
    "ConfigError",
    "USER_CONFIG_VARIABLE",
    "Settings",
    "default_user_config",
    "deep_merge",
    "load_config",
    "read_yaml",
    "user_config_path",
    "validate_layers",
    "with_user_config",
]


def resolve_config_path(name: str | Path) -> Path:
    """A bundled config by name (`default`, `swebench`) or a file path."""
    path = Path(name)
    if path.suffix in {".yaml", ".yml"} and path.exists():
        return path
    if str(name) in CONFIG_NAMES:
        return PROMPTS_DIR / f"{name}.yaml"
    raise ConfigError(f"config not found: {name} (neither a file nor one of {list(CONFIG_NAMES)})")


def anchored(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A config's relative `environment.readable`, `writable` and `sockets` paths made relative to `folder` (a file's
    own, as its `extends` is, not the folder the command runs in); absolute and `~` paths as they are."""
    section = data.get("environment")
    for key in PATH_LISTS if isinstance(section, dict) else ():
        if isinstance(entries := section.get(key), list):
            section[key] = [str(folder / path) if relative(path) else path for path in entries]
    return data


def relative(path: Any) -> bool:
    return isinstance(path, str) and bool(path) and not path.startswith(("/", "~"))


def read_layer(path: Path) -> dict[str, Any]:
    """A config file's settings, its relative paths relative to its folder (a stream's, `-c -` or `-c <(…)`: to the
    current folder)."""
    streamed = not path.is_file() or str(path.absolute()).startswith(("/dev/", "/proc/"))
    return anchored(read_yaml(path), Path.cwd() if streamed else path.parent.absolute())


def anchored_text(raw: bytes, folder: Path) -> bytes:
    """A config read from a stream (`-c -`, `-c <(…)`), its relative paths made relative to `folder` (the current
    one, the stream having none): what its copy beside the run's outputs holds. As it was where it names none, or
    where it is no YAML mapping (loading the copy says what is wrong with it)."""
    try:
        data = parsed_config(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return raw
    if not isinstance(data, dict):
        return raw
    moved = anchored(deepcopy(data), folder)
    return raw if moved == data else yaml.safe_dump(moved, sort_keys=False, allow_unicode=True).encode("utf-8")


@cache
def bundled_config(name: str) -> Settings:
    """A bundled config (`default`, `swebench`), loaded once per process."""
    return load_config(name)


def with_user_config(overrides: Overrides = None) -> list[Path]:
    """The override files of a command: the user's config file (if any), then the `--config` files (or file)."""
    user = user_config_path()
    given = [overrides] if isinstance(overrides, str | Path) else overrides or []
    return [*([user] if user else []), *map(Path, given)]


def config_layers(base: str | Path = "default", overrides: Overrides = None, **values: Any) -> Layers:
    """The (origin, data) layers in merge order: the base's `extends` chain, the override files (or file), then
    `values`."""
    layers = _layers_with_extends(resolve_config_path(base), set())
    for override in [overrides] if isinstance(overrides, str | Path) else overrides or []:
        path = Path(override)
        data = read_layer(path)
        if "extends" in data:
            raise ConfigError(f"{path}: extends: only a base config may extend another; an override file cannot")
        layers.append((str(path), data))
    if values:
        layers.append(("settings", values))
    return layers


def validate_layers(layers: Layers, variants: Iterable[Any] = ()) -> Settings:
    """The layers validated as the whole settings; a base file that extends no bundled config and misses settings is
    told what it lacks (the bundled config it did not extend), not only the first setting missing, whichever file
    over it (one it extends, the user's, `--config`) set the section missing it."""
    try:
        return validate(settings_class(kinds_of(variants)), layers)
    except ConfigError as error:
        root, said = layers[0][0], str(error)
        origin = next((name for name, _ in layers if said.startswith(f"{name}: ")), None)
        if Path(root).parent == PROMPTS_DIR or origin is None or ": missing setting" not in said:
            raise
        raise ConfigError(
            f"{root}: extends no bundled config, so it must set every setting: add `extends: default` (or `extends: "
            f"swebench`) to start from one; {said.removeprefix(f'{origin}: ')}"
        ) from None


def load_config(
    base: str | Path = "default", overrides: Overrides = None, variants: Iterable[Any] = (), **values: Any
) -> Settings:
    """The bundled/base config (its `extends` chain first), each override file deep-merged in order, then `values`;
    validated once: a bad key or value raises ConfigError naming the file and the key path. `variants`: variants of
    one's own (or their classes) whose settings sections the config may hold."""
    return validate_layers(config_layers(base, overrides, **values), variants)


def _layers_with_extends(path: Path, seen: set[Path]) -> Layers:
    if path.resolve() in seen:
        raise ConfigError(f"{path}: extends: loops back to itself")
    data = read_layer(path)
    parent = data.pop("extends", None)
    if parent is None:
        return [(str(path), data)]
    if not isinstance(parent, str) or not parent.strip():
        raise ConfigError(
            f"{path}: extends: must name a bundled config ({', '.join(CONFIG_NAMES)}) or a YAML file (got {parent!r})"
        )
    try:
        parent_path = (path.parent / parent) if (path.parent / parent).exists() else resolve_config_path(parent)
    except ConfigError as error:
        raise ConfigError(f"{path}: extends: {error}") from None
    return [*_layers_with_extends(parent_path, seen | {path.resolve()}), (str(path), data)]


def _leaves(data: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict) and data:
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*prefix, str(key)))]
    return [(prefix, data)]


def _sets(layer: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Whether a layer sets the value at `path`: it holds the path, or a non-mapping above it that replaces it all."""
    data: Any = layer
    for depth, part in enumerate(path):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
        if depth < len(path) - 1 and not isinstance(data, dict):
            return True
    return True


def set_by_file(layers: Layers, key: str) -> bool:
    """Whether a file of one's own (the user's config, a `--config` file: not a bundled one) sets the dotted `key`."""
    path = tuple(key.split("."))
    return any(_sets(data, path) for name, data in layers if Path(name).parent != PROMPTS_DIR)


def explain(layers: Layers) -> list[tuple[str, Any, str]]:
    """Every effective setting as (dotted key, value, origin): the last layer that set it, else the bundled prompts
    file of a template's section, else `built-in` (a default of the typed settings)."""
    settings = validate_layers(layers)
    return [
        (".".join(path), value, _origin(layers, settings, path))
        for path, value in _leaves(settings.model_dump(mode="json"))
    ]


def _origin(layers: Layers, settings: Settings, path: tuple[str, ...]) -> str:
    if layer := next((name for name, data in reversed(layers) if _sets(data, path)), None):
        return layer
    node: Any = settings
    for part in path:
        if isinstance(node, BundledTemplates):
            return str(PROMPTS_DIR / node.BUNDLED[0])
        node = getattr(node, part, None)
    return "built-in"


def register_config_secrets(settings: CoreSettings) -> None:
    """The secrets the settings hold (headers, `environment.env`), added to the process-wide secret filter: masked
    in every output from now on. Called by whoever runs with the settings, not by loading them."""
    mark_secret_names(settings.secrets)
    register(secrets_in(settings.environment.env) + secrets_in(settings.model.kwargs))
