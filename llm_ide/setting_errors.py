"""A settings validation error as one line: the file that set the offending key, the key path, what is wrong (an
unknown key or tool: the nearest known name)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_core import PydanticCustomError

Layers = list[tuple[str, dict[str, Any]]]
TOOLS_DIR = Path(__file__).parent / "tools"
RETIRED = {  # a setting an earlier version had: what took its place, said where it is met in a config file
    "memory.cached_price": "a model's own price of a re-read, model.prices.<model>.cache_read "
    "(memory.unpriced.cache_read for a model without a price)",
    "memory.history_recent": "memory.history_max",
    "memory.history_brief": "memory.history_max",
    "templates.rows_shown_above": "templates.rows_in_context",
    "templates.observations.navigator_denied": "navigator.templates.denied",
    "templates.observations.navigator_guidance": "navigator.templates.guidance",
    "templates.observations.navigator_off": "navigator.templates.absent",
    "templates.observations.navigator_review": "navigator.templates.review",
    "templates.observations.navigator_timeout": "navigator.templates.timeout",
}


def describe_error(error: ValidationError, layers: Layers, schema: type[BaseModel] | None = None) -> str:
    """One line: the file that set the offending key, the key path, what is wrong (an unknown key: the `schema`'s
    nearest name)."""
    errors = error.errors()
    first = next((item for item in errors if typo_of(item, errors[0])), errors[0])  # `outpt`, not `output` missing
    loc = tuple(part for part in first["loc"] if isinstance(part, str | int))
    key = ".".join(str(part) for part in loc)
    origin = next((name for name, data in reversed(layers) if _holds(data, loc)), None)
    if origin is None:  # a missing key: the file that set its parent section (e.g. `agent: null`)
        origin = next((name for name, data in reversed(layers) if _holds(data, loc[:-1])), layers[0][0])
    retired = RETIRED.get(key)
    said = {
        "extra_forbidden": f"a setting of an earlier version: {retired} took its place"
        if retired
        else f"unknown setting{nearest(schema, loc)}",
        "missing": "missing setting",
        "model_type": f"input should be a section: a mapping of {keys(schema, loc)}",
    }
    got = "" if first["type"] == "template" else f" (got {first.get('input')!r})"  # (a template: long, and named)
    what = said.get(first["type"]) or f"{first['msg'][:1].lower()}{first['msg'][1:]}"
    what += got if first["type"] not in ("extra_forbidden", "missing") else ""
    more = error.error_count() - 1
    return f"{origin}: {key}: {what}" + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")


def typo_of(item: Any, missing: Any) -> bool:
    """Whether `item` is an unknown key beside the `missing` one (its misspelling, most likely)."""
    siblings = item["loc"][:-1] == missing["loc"][:-1]
    return missing["type"] == "missing" and item["type"] == "extra_forbidden" and siblings


def section(schema: Any, loc: tuple[str | int, ...]) -> list[str]:
    """The setting names of the section at `loc` (none when the path leaves the typed settings)."""
    for part in loc:
        if get_origin(schema) is dict:  # a mapping of named sections (model.prices)
            schema = get_args(schema)[1]
            continue
        field = getattr(schema, "model_fields", {}).get(part)
        schema = field.annotation if field is not None else None
    return list(getattr(schema, "model_fields", {}))


def nearest(schema: Any, loc: tuple[str | int, ...]) -> str:
    """` (did you mean NAME?)` for the unknown key at `loc`, when the section it is in has a name close to it."""
    close = difflib.get_close_matches(str(loc[-1]), section(schema, loc[:-1]), n=1) if loc else []
    return f" (did you mean {close[0]}?)" if close else ""


def keys(schema: Any, loc: tuple[str | int, ...]) -> str:
    """The names a section at `loc` takes, the first 6 of them."""
    names = section(schema, loc)
    return ", ".join(names[:6]) + (", …" if len(names) > 6 else "") if names else "settings"


def _holds(data: Any, loc: tuple[str | int, ...]) -> bool:
    for part in loc:
        found = isinstance(data, dict) and part in data
        found = found or (isinstance(data, list) and isinstance(part, int) and part < len(data))
        if not found:
            return False
        data = data[part]
    return True


def known_tool(name: str) -> str:
    """A tool of `environment.tools`: one in llm_ide/tools, or a tool yaml's path; a misspelt name is an error, not a
    tool that fails to install while the run goes on without it."""
    shipped = sorted(path.stem for path in TOOLS_DIR.glob("*.yaml"))
    if name in shipped or "/" in name or name.endswith((".yaml", ".yml")):
        return name
    close = difflib.get_close_matches(name, shipped, n=1)
    hint = f"did you mean {close[0]}?; " if close else ""
    raise PydanticCustomError(
        "unknown_tool", f"unknown tool ({hint}the tools: {', '.join(shipped)}, or a tool yaml's path)"
    )


ToolName = Annotated[str, AfterValidator(known_tool)]


DOCKER_BYTES = re.compile(r"(?i)([0-9]*\.?[0-9]+)(?:[bkmg]b?)?")  # docker's mem_limit: 536870912, "512m", "2gb"


def docker_bytes(value: str) -> str:
    """A size as docker takes it (`environment.memory`): "-5g" failed at the container's start, "0" meant no limit."""
    if not (match := DOCKER_BYTES.fullmatch(value)) or not float(match[1]):
        raise PydanticCustomError("bytes", "input should be a size above 0: bytes, or a number with k, m or g (512m)")
    return value


DockerBytes = Annotated[str, Field(strict=False), AfterValidator(docker_bytes)]  # 536870912 too
