"""SWE-bench instances: loading (Hugging Face `datasets` or a local .json/.jsonl/.parquet file) and selection."""

from __future__ import annotations

import json
import os
import random
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from llm_ide.errors import UsageError
from llm_ide.fileio import file_name_problem
from llm_ide.terminal import plural

SUBSETS: dict[str, str] = {
    "lite": "princeton-nlp/SWE-bench_Lite",
    "verified": "princeton-nlp/SWE-bench_Verified",
    "full": "princeton-nlp/SWE-bench",
}
LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet")
SHUFFLE_SEED = 42


class DatasetError(UsageError, ValueError):
    """The dataset as a whole cannot be loaded (unreachable, missing file, unreadable format)."""


@dataclass(frozen=True)
class RowError:
    row: int
    instance_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"row {self.row}" + (f" ({self.instance_id})" if self.instance_id else "")
        return f"{where}: field {self.field}: {self.message}"


HIDDEN = frozenset({"patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script"})  # the answer and its tests


@dataclass
class Instance:
    instance_id: str
    problem_statement: str
    repo: str = ""
    base_commit: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    image: str = ""
    eval_script: str | None = None
    log_parser: str | None = None
    patch: str = ""
    test_patch: str = ""
    reproduction: str = ""  # a script that reproduces the issue, given with the task (llm_ide/reproduction)
    row: dict[str, Any] = field(default_factory=dict, repr=False)
    index: int = 0  # its row's number in the dataset, from 0, malformed rows counted (-i N, --slice)

    def task_vars(self) -> dict[str, Any]:
        """Scalar fields of the row, for templates and tool setup scripts; never the fix or the hidden tests."""
        scalars = {k: v for k, v in self.row.items() if isinstance(v, str | int | float | bool) and k not in HIDDEN}
        return {**scalars, "instance_id": self.instance_id, "image": self.image, "repo": self.repo}


@dataclass
class Dataset:
    source: str
    instances: list[Instance]
    errors: list[RowError]

    def rows(self) -> list[Instance | RowError]:
        """Every row in the dataset's order, the malformed ones too: what a row number counts."""
        return sorted(
            [*self.instances, *self.errors], key=lambda entry: entry.row if isinstance(entry, RowError) else entry.index
        )

    def by_id(self) -> dict[str, Instance | RowError]:
        """Each id's instance, else its first malformed row (a duplicate's id is its earlier row's, which loaded)."""
        found: dict[str, Instance | RowError] = {instance.instance_id: instance for instance in self.instances}
        for error in self.errors:
            if error.instance_id is not None:
                found.setdefault(error.instance_id, error)
        return found

    def counted(self) -> str:
        """`3 instances`, and its rows when some are malformed: `3 instances (5 rows, 2 malformed)`."""
        rows = len(self.instances) + len(self.errors)
        malformed = f" ({plural(rows, 'row')}, {len(self.errors)} malformed)" if self.errors else ""
        return plural(len(self.instances), "instance") + malformed


def image_name(row: dict[str, Any]) -> str:
    """SPEC §10: `image_name` or `image` when given, else the official SWE-bench image name; lowercased."""
    given = row.get("image_name") or row.get("image")
    if given:
        return str(given).lower()
    instance_id = str(row["instance_id"]).replace("__", "_1776_")
    return f"swebench/sweb.eval.x86_64.{instance_id}:latest".lower()


def _test_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as error:
            raise ValueError(f"not a JSON list of test names ({error.msg} at position {error.pos})") from None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"expected a list of test names, got {type(value).__name__}")
    return list(value)


def _optional_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _optional_script(value: Any) -> str | None:
    """A script's text; a blank one is none (an empty script exits 0: judged 'resolved' on the original code)."""
    text = _optional_str(value)
    return text if text and text.strip() else None


def parse_row(row: Any, index: int) -> Instance | RowError:
    if not isinstance(row, dict):
        return RowError(index, None, "<row>", f"expected an object, got {type(row).__name__}")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id.strip():
        return RowError(index, None, "instance_id", "missing or not a non-empty string")
    if problem := file_name_problem(instance_id):  # it names the instance's folder in the batch's output
        return RowError(index, None, "instance_id", f"{instance_id[:80]!r}: {problem}")
    statement = row.get("problem_statement")
    if not isinstance(statement, str) or not statement.strip():
        return RowError(index, instance_id, "problem_statement", "missing or not a non-empty string")
    values: dict[str, Any] = {}
    for name, key, parse in [
        ("fail_to_pass", "FAIL_TO_PASS", _test_list),
        ("pass_to_pass", "PASS_TO_PASS", _test_list),
        ("eval_script", "eval_script", _optional_str),
        ("log_parser", "log_parser", _optional_str),
        ("repo", "repo", _optional_str),
        ("base_commit", "base_commit", _optional_str),
        ("patch", "patch", _optional_str),
        ("test_patch", "test_patch", _optional_str),
        ("reproduction", "reproduction", _optional_script),
        ("image", "image", _optional_str),
        ("image", "image_name", _optional_str),
    ]:
        try:
            values[name] = parse(row.get(key))
        except ValueError as error:
            return RowError(index, instance_id, key, str(error))
    return Instance(
        instance_id=instance_id,
        problem_statement=statement,
        repo=values["repo"] or "",
        base_commit=values["base_commit"] or "",
        fail_to_pass=values["fail_to_pass"],
        pass_to_pass=values["pass_to_pass"],
        image=image_name(row),
        eval_script=values["eval_script"],
        log_parser=values["log_parser"],
        patch=values["patch"] or "",
        test_patch=values["test_patch"] or "",
        reproduction=values["reproduction"] or "",
        row=dict(row),
        index=index,
    )


def parse_rows(rows: list[Any], source: str) -> Dataset:
    instances: list[Instance] = []
    errors: list[RowError] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if isinstance(row, RowError):
            errors.append(row)
            continue
        parsed = parse_row(row, index)
        if isinstance(parsed, Instance) and parsed.instance_id in seen:
            parsed = RowError(index, parsed.instance_id, "instance_id", "duplicate of an earlier row")
        if isinstance(parsed, RowError):
            errors.append(parsed)
        else:
            seen.add(parsed.instance_id)
            instances.append(parsed)
    return Dataset(source, instances, errors)


def read_local_rows(path: Path) -> list[Any]:
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DatasetError(f"reading {path} needs pyarrow (pip install pyarrow)") from None
        try:
            return pq.read_table(path).to_pylist()
        except Exception as error:  # pyarrow raises several unrelated types for unreadable files
            raise DatasetError(f"{path}: not a readable parquet file: {error}") from None
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        rows: list[Any] = []
        for number, line in enumerate(raw.splitlines()):  # bytes: a string's U+2028 does not end its line
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line.decode("utf-8")))
            except UnicodeDecodeError as error:
                rows.append(RowError(len(rows), None, "<json>", f"line {number + 1} is not UTF-8 ({error.reason})"))
            except json.JSONDecodeError as error:
                rows.append(RowError(len(rows), None, "<json>", f"line {number + 1} is not valid JSON: {error.msg}"))
        return rows
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 (byte {error.start}: {error.reason})") from None
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: not valid JSON: {error}") from None
    if isinstance(data, dict):
        return [{"instance_id": key, **row} if isinstance(row, dict) else row for key, row in data.items()]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of instances (or an object of instance_id → instance)")
    return data


def dataset_name(subset: str) -> str:
    return SUBSETS.get(subset.lower(), subset)


def is_local(subset: str) -> bool:
    return subset.endswith(LOCAL_SUFFIXES) or Path(subset).is_file()


def _hub_reachable(timeout: float = 5.0) -> str | None:
    """None when the Hugging Face Hub answers a TCP connect, else the reason."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        return f"{host}:{port}: {error.strerror or error}"
    return None


def _hint(name: str, split: str) -> str:
    stem = name.rsplit("/", 1)[-1]
    return f"pass a local file instead: --subset path/to/{stem}-{split}.jsonl (.json, .jsonl or .parquet)"


def read_hub_rows(name: str, split: str) -> list[Any]:
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"cannot load dataset {name} (split {split}): the `datasets` package is not installed "
            f"(pip install 'llm-ide[swebench]'); {_hint(name, split)}"
        ) from None
    unreachable = _hub_reachable()
    if unreachable:  # try the local cache only, without datasets' long retry loop
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        datasets.config.HF_HUB_OFFLINE = True
    try:
        return list(datasets.load_dataset(name, split=split))
    except (ConnectionError, OSError) as error:
        reason = unreachable or str(error).splitlines()[0]
        raise DatasetError(
            f"could not reach dataset {name} (split {split}) on the Hugging Face Hub ({reason}); {_hint(name, split)}"
        ) from None
    except ValueError as error:  # unknown split, bad config
        raise DatasetError(f"cannot load dataset {name} (split {split}): {str(error).splitlines()[0]}") from None


def load_dataset(subset: str, split: str = "test") -> Dataset:
    """`subset`: lite | verified | full | a Hugging Face dataset name | a local .json/.jsonl/.parquet file."""
    if is_local(subset):
        return parse_rows(read_local_rows(Path(subset)), str(subset))
    name = dataset_name(subset)
    if "/" not in name:
        raise DatasetError(
            f"unknown subset {subset!r}: use one of {', '.join(SUBSETS)}, a Hugging Face dataset name, "
            "or a local .json/.jsonl/.parquet file"
        )
    return parse_rows(read_hub_rows(name, split), f"{name}:{split}")


def parse_slice(spec: str) -> slice:
    if not spec:
        return slice(None)
    parts = spec.split(":")
    if len(parts) > 3:
        raise ValueError(f"invalid slice {spec!r}: expected a:b or a:b:c")
    try:
        values = [int(part) if part.strip() else None for part in parts]
    except ValueError:
        raise ValueError(f"invalid slice {spec!r}: expected integers, e.g. 0:10") from None
    if len(values) == 1:
        return slice(values[0], values[0] + 1 or None if values[0] is not None else None)  # -1: the last one
    return slice(*values)


def select(
    rows: list[Instance] | list[Instance | RowError],
    *,
    shuffle: bool = False,
    filter_regex: str = "",
    slice_spec: str = "",
    skip_ids: set[str] | frozenset[str] = frozenset(),
) -> list[Instance]:
    """Selection order: shuffle (seeded, so reruns pick the same instances) → filter → slice → skip existing. `rows`:
    the dataset's, malformed ones too (`Dataset.rows`), so that a slice counts rows as `-i N` does; they are then left
    out. A shuffle draws instances: the seeded order of every row (a row mended keeps the others' order), malformed
    ones left out of it."""
    chosen = list(rows)
    if shuffle:
        random.Random(SHUFFLE_SEED).shuffle(chosen)
        chosen = [row for row in chosen if isinstance(row, Instance)]
    if filter_regex:
        try:
            pattern = re.compile(filter_regex)
        except re.error as error:
            raise ValueError(f"invalid --filter regex {filter_regex!r}: {error}") from None
        chosen = [row for row in chosen if row.instance_id is not None and pattern.search(row.instance_id)]
    chosen = chosen[parse_slice(slice_spec)]
    return [row for row in chosen if isinstance(row, Instance) and row.instance_id not in skip_ids]


def find_instance(dataset: Dataset, key: str) -> Instance:
    """An instance by id, or by its row's number in the dataset (malformed rows counted) when `key` is an integer. A
    malformed row of that id or number is named with what is wrong with it, not taken for one the dataset lacks."""
    instances = dataset.instances
    for inst in instances:
        if inst.instance_id == key:
            return inst
    if malformed := [error for error in dataset.errors if error.instance_id == key]:
        raise ValueError(f"instance {key!r} is malformed in the dataset: {malformed[0]}")
    if re.fullmatch(r"-?\d+", key):
        index, rows = int(key), dataset.rows()
        if not -len(rows) <= index < len(rows):
            raise ValueError(f"instance index {index} is out of range (the dataset has {plural(len(rows), 'row')})")
        if isinstance(row := rows[index], RowError):
            raise ValueError(f"instance {index} is malformed in the dataset: {row}")
        return row
    close = [inst.instance_id for inst in instances if key.lower() in inst.instance_id.lower()][:5]
    hint = f"; similar ids: {', '.join(close)}" if close else ""
    if unnamed := [error for error in dataset.errors if error.instance_id is None]:
        hint += f"; {plural(len(unnamed), 'malformed row')} without an id skipped ({unnamed[0]})"
    raise ValueError(f"no instance {key!r} in the dataset{hint}")
