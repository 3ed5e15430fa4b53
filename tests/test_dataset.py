from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import closed_port
from in_process import invoke

from llm_ide.swebench.dataset import (
    Dataset,
    DatasetError,
    Instance,
    RowError,
    find_instance,
    image_name,
    load_dataset,
    parse_slice,
    select,
)

ROWS = [
    {"instance_id": "astropy__astropy-12907", "problem_statement": "a", "FAIL_TO_PASS": '["t1"]', "PASS_TO_PASS": "[]"},
    {
        "instance_id": "django__django-11099",
        "problem_statement": "b",
        "FAIL_TO_PASS": ["t2", "t3"],
        "image": "Own/Img:1",
    },
    {"instance_id": "sympy__sympy-20590", "problem_statement": "c", "eval_script": "pytest", "image_name": "x:y"},
]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"instance_id": "astropy__astropy-12907"}, "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"),
        ({"instance_id": "Pydata__Xarray-4094"}, "swebench/sweb.eval.x86_64.pydata_1776_xarray-4094:latest"),
        ({"instance_id": "a__b-1", "image": "Registry/Img:Tag"}, "registry/img:tag"),
        ({"instance_id": "a__b-1", "image_name": "named:1", "image": "other:2"}, "named:1"),
        ({"instance_id": "a__b__c-1"}, "swebench/sweb.eval.x86_64.a_1776_b_1776_c-1:latest"),
    ],
)
def test_image_rule(row: dict[str, str], expected: str) -> None:
    assert image_name(row) == expected


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".json-mapping"])
def test_local_formats_load_the_same_instances(tmp_path: Path, suffix: str) -> None:
    if suffix == ".jsonl":
        path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    elif suffix == ".json":
        path = tmp_path / "d.json"
        path.write_text(json.dumps(ROWS))
    elif suffix == ".json-mapping":  # {instance_id: row}
        path = tmp_path / "d.json"
        path.write_text(
            json.dumps({row["instance_id"]: {k: v for k, v in row.items() if k != "instance_id"} for row in ROWS})
        )
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "d.parquet"
        columns = sorted({key for row in ROWS for key in row})
        as_strings = [{k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()} for row in ROWS]
        pq.write_table(pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in as_strings]), path)
    dataset = load_dataset(str(path), "ignored")
    assert dataset.errors == []
    assert [(i.instance_id, i.fail_to_pass, i.pass_to_pass, i.image, i.eval_script) for i in dataset.instances] == [
        ("astropy__astropy-12907", ["t1"], [], "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", None),
        ("django__django-11099", ["t2", "t3"], [], "own/img:1", None),
        ("sympy__sympy-20590", [], [], "x:y", "pytest"),
    ]
    assert dataset.instances[0].task_vars()["instance_id"] == "astropy__astropy-12907"


def test_malformed_rows_are_named_and_the_others_load(tmp_path: Path) -> None:
    rows: list[object] = [
        ROWS[0],
        {"instance_id": "bad__f2p-1", "problem_statement": "x", "FAIL_TO_PASS": "[not json"},
        "{this line is not json",
        {"problem_statement": "no id"},
        {"instance_id": "bad__p2p-1", "problem_statement": "x", "PASS_TO_PASS": [1, 2]},
        {"instance_id": "bad__statement-1"},
        {"instance_id": "bad__script-1", "problem_statement": "x", "eval_script": 7},
        ROWS[1],
        ROWS[0],
        [1, 2],
    ]
    dataset = load_dataset(str(write_jsonl(tmp_path / "d.jsonl", rows)))
    assert [i.instance_id for i in dataset.instances] == ["astropy__astropy-12907", "django__django-11099"]
    assert [(e.row, e.instance_id, e.field) for e in dataset.errors] == [
        (1, "bad__f2p-1", "FAIL_TO_PASS"),
        (2, None, "<json>"),
        (3, None, "instance_id"),
        (4, "bad__p2p-1", "PASS_TO_PASS"),
        (5, "bad__statement-1", "problem_statement"),
        (6, "bad__script-1", "eval_script"),
        (8, "astropy__astropy-12907", "instance_id"),
        (9, None, "<row>"),
    ]
    assert str(dataset.errors[0]).startswith("row 1 (bad__f2p-1): field FAIL_TO_PASS: not a JSON list")
    assert "line 3 is not valid JSON" in str(dataset.errors[1])
    assert "duplicate" in str(dataset.errors[6])


@pytest.mark.parametrize(("given", "kept"), [("", ""), (" \n\t", ""), (None, ""), ("print(1)\n", "print(1)\n")])
def test_a_rows_blank_reproduction_is_none(tmp_path: Path, given: str | None, kept: str) -> None:
    """A blank `reproduction` was taken as a script: run empty, it exits 0, judged 'resolved' on the original code."""
    row = {**ROWS[0], "reproduction": given}
    (instance,) = load_dataset(str(write_jsonl(tmp_path / "d.jsonl", [row]))).instances
    assert instance.reproduction == kept


def test_a_line_that_is_not_utf8_is_a_malformed_row_and_a_json_file_names_itself(tmp_path: Path) -> None:
    """One byte that is not UTF-8 refused the whole dataset with Python's `'utf-8' codec can't decode byte 0xff in
    position 19023`, naming neither the file nor the line. A row whose text holds U+2028 is one line of JSONL."""
    lines = [json.dumps(ROWS[0]).encode(), b'{"instance_id": "bad__bytes-1", "problem_statement": "\xff"}']
    lines.append(json.dumps({**ROWS[1], "problem_statement": "b\u2028c"}, ensure_ascii=False).encode())
    (jsonl := tmp_path / "d.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    dataset = load_dataset(str(jsonl))
    assert [i.instance_id for i in dataset.instances] == ["astropy__astropy-12907", "django__django-11099"]
    assert [str(e) for e in dataset.errors] == ["row 1: field <json>: line 2 is not UTF-8 (invalid start byte)"]
    (whole := tmp_path / "d.json").write_bytes(b"[" + lines[1] + b"]")
    with pytest.raises(DatasetError, match=r"d\.json: not UTF-8 \(byte 55: invalid start byte\)$"):
        load_dataset(str(whole))


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "dataset file not found"), ("{not json", "not valid JSON"), ('"a string"', "expected a list")],
)
def test_unreadable_files_raise_one_clear_error(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "d.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_dataset(str(path))


def test_unknown_subset_names_the_choices() -> None:
    with pytest.raises(DatasetError, match="unknown subset 'nope': use one of lite, verified, full"):
        load_dataset("nope")


def test_unreachable_hub_fails_fast_with_the_local_file_hint(tmp_path: Path) -> None:
    """A subprocess (fresh `datasets` import) whose Hub endpoint is a closed loopback port."""
    pytest.importorskip("datasets")
    code = (
        "from llm_ide.swebench.dataset import load_dataset, DatasetError\n"
        "try:\n    load_dataset('verified', 'test')\nexcept DatasetError as e:\n    print(e)\n"
    )
    port = closed_port()
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    # the reason is the connect probe's: the hub was not asked through datasets' own retry loop
    reason = f"on the Hugging Face Hub (127.0.0.1:{port}: Connection refused)"
    assert lines[0].startswith(f"could not reach dataset princeton-nlp/SWE-bench_Verified (split test) {reason}")
    assert "--subset path/to/SWE-bench_Verified-test.jsonl" in lines[0]


def make(ids: list[str]) -> list[Instance]:
    return [Instance(instance_id=i, problem_statement="p") for i in ids]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("", slice(None)), ("2:5", slice(2, 5)), (":3", slice(None, 3)), ("1::2", slice(1, None, 2)), ("4", slice(4, 5))]
    + [("-1", slice(-1, None)), ("-2", slice(-2, -1))],
)
def test_parse_slice(spec: str, expected: slice) -> None:
    assert parse_slice(spec) == expected


def test_a_slice_that_selects_nothing_is_named_in_the_error(tmp_path: Path) -> None:
    """`--filter astropy --slice -1` selected nothing, and the error blamed the filter: `--filter 'astropy' matches
    none of the 3 instances`."""
    dataset = str(write_jsonl(tmp_path / "d.jsonl", ROWS))
    common = ["swebench", "--subset", dataset, "--environment", "local", "--model", "scripted:none.yaml", "-o", "out"]
    last = select(load_dataset(dataset).instances, filter_regex="astropy", slice_spec="-1")
    assert [i.instance_id for i in last] == ["astropy__astropy-12907"]
    done = invoke(*common, "--filter", "astropy", "--slice", "3", cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    assert (done.returncode, done.stderr) == (
        2,
        "error: no instance selected: --filter 'astropy' with --slice '3' matches none of the 3 instances\n",
    )


def test_selection_order_is_shuffle_filter_slice_skip() -> None:
    instances = make([f"repo__p-{n}" for n in range(10)] + [f"other__q-{n}" for n in range(5)])
    shuffled = [i.instance_id for i in select(instances, shuffle=True)]
    assert sorted(shuffled) == sorted(i.instance_id for i in instances)
    assert shuffled != [i.instance_id for i in instances]
    assert shuffled == [i.instance_id for i in select(instances, shuffle=True)]  # seeded: a rerun picks the same
    filtered = [s for s in shuffled if s.startswith("repo__")]
    chosen = select(instances, shuffle=True, filter_regex="repo__", slice_spec="1:5", skip_ids={filtered[2]})
    assert [i.instance_id for i in chosen] == [filtered[1], filtered[3], filtered[4]]
    assert [i.instance_id for i in select(instances, filter_regex=r"other__q-[34]")] == ["other__q-3", "other__q-4"]
    with pytest.raises(ValueError, match="invalid --filter regex"):
        select(instances, filter_regex="(")
    with pytest.raises(ValueError, match="invalid slice"):
        select(instances, slice_spec="a:b")


def test_find_instance_by_id_or_index() -> None:
    dataset = Dataset("d.jsonl", make(["a__x-1", "b__y-2", "c__z-3"]), [])
    assert find_instance(dataset, "b__y-2").instance_id == "b__y-2"
    assert find_instance(dataset, "2").instance_id == "c__z-3"
    assert find_instance(dataset, "-1").instance_id == "c__z-3"
    with pytest.raises(ValueError, match="index 3 is out of range"):
        find_instance(dataset, "3")
    with pytest.raises(ValueError, match="no instance 'y-2'.*similar ids: b__y-2"):
        find_instance(dataset, "y-2")


@pytest.mark.parametrize(
    ("instance", "said"),
    [
        ("bad__f2p-1", "instance 'bad__f2p-1' is malformed in the dataset: row 1 (bad__f2p-1): field FAIL_TO_PASS: "),
        ("bad__statement-1", "instance 'bad__statement-1' is malformed in the dataset: row 3 (bad__statement-1): "),
        ("gone__x-1", "no instance 'gone__x-1' in the dataset; 1 malformed row without an id skipped (row 2: field "),
    ],
)
def test_swebench_single_names_what_is_wrong_with_a_malformed_row(tmp_path: Path, instance: str, said: str) -> None:
    """`swebench-single -i ID` whose row was malformed said `no instance 'ID' in the dataset`, as if the id were not
    there, and never why (the batch warns of each malformed row; swebench-single said nothing of them)."""
    rows = [ROWS[0], {**ROWS[0], "instance_id": "bad__f2p-1", "FAIL_TO_PASS": "[x"}, "{not json"]
    dataset = write_jsonl(tmp_path / "d.jsonl", [*rows, {"instance_id": "bad__statement-1", "problem_statement": " "}])
    args = ["--subset", str(dataset), "-i", instance, "--environment", "local", "--model", "scripted:none.yaml"]
    done = invoke("swebench-single", *args, "-o", "out", cwd=tmp_path, env={**os.environ, "COLUMNS": "300"})
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    assert done.stderr.startswith(f"error: {said}"), done.stderr
    assert not (tmp_path / "out").exists()


def test_row_error_text() -> None:
    assert str(RowError(4, "a__b-1", "PASS_TO_PASS", "bad")) == "row 4 (a__b-1): field PASS_TO_PASS: bad"


@pytest.mark.parametrize(
    ("name", "count"),
    [("SWE-bench_Lite-dev.jsonl", 23), ("SWE-bench_Lite-test.jsonl", 300), ("SWE-bench_Verified-test.jsonl", 500)],
)
def test_real_swebench_files(shared_dir: Path, name: str, count: int) -> None:
    path = shared_dir / "data" / "swebench" / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    dataset = load_dataset(str(path), "test")
    assert (len(dataset.instances), dataset.errors) == (count, [])
    sample = dataset.instances[:: max(1, count // 25)]
    for instance in sample:
        without = {k: v for k, v in instance.row.items() if k not in ("image", "image_name")}
        assert image_name(without) == instance.row["image"]  # the official naming rule, recomputed
        assert instance.fail_to_pass and isinstance(instance.fail_to_pass[0], str)
        assert instance.eval_script and ">>>>> Start Test Output" in instance.eval_script


NUMBERED = [{"instance_id": "bad__statement-1", "problem_statement": ""}, ROWS[0], "{not json", ROWS[1], ROWS[2]]


@pytest.mark.parametrize(
    ("key", "found"),
    [
        ("0", "instance 0 is malformed in the dataset: row 0 (bad__statement-1): field problem_statement: missing"),
        ("1", "astropy__astropy-12907"),
        ("2", "instance 2 is malformed in the dataset: row 2: field <json>: line 4 is not valid JSON"),
        ("3", "django__django-11099"),
        ("-1", "sympy__sympy-20590"),
        ("-5", "instance -5 is malformed in the dataset: row 0 (bad__statement-1)"),
        ("5", "instance index 5 is out of range (the dataset has 5 rows)"),
    ],
)
def test_a_row_number_is_the_datasets_row_malformed_rows_counted(tmp_path: Path, key: str, found: str) -> None:
    """`swebench-single -i 0` with row 0 malformed ran row 1: the number counted only the rows that loaded (and
    `--slice 0:2` chose rows 1 and 3). A blank line is no row."""
    path = write_jsonl(tmp_path / "d.jsonl", [*NUMBERED[:2], "", *NUMBERED[2:]])
    dataset = load_dataset(str(path))
    try:
        said = find_instance(dataset, key).instance_id
    except ValueError as error:
        said = str(error)
    assert said.startswith(found), said
    assert [i.index for i in dataset.instances] == [1, 3, 4]
    assert [i.instance_id for i in select(dataset.rows(), slice_spec="0:2")] == ["astropy__astropy-12907"]
    by_filter = select(dataset.rows(), filter_regex="__s", slice_spec="0")  # bad__statement-1's row, then sympy's
    assert (by_filter, len(select(dataset.rows(), shuffle=True))) == ([], 3)


@pytest.mark.parametrize("spec", ["0:2", "1:", ":-1", "0"])
def test_a_shuffle_draws_instances_only(tmp_path: Path, spec: str) -> None:
    """`--shuffle --slice 0:2` chose none of the 3 instances here: the seeded order drew rows 3 and 1, malformed, then
    skipped."""
    rows = [ROWS[0], NUMBERED[2], ROWS[1], NUMBERED[0], ROWS[2]]
    dataset = load_dataset(str(write_jsonl(tmp_path / "d.jsonl", rows)))
    drawn = [i.instance_id for i in select(dataset.rows(), shuffle=True)]
    assert sorted(drawn) == sorted(i.instance_id for i in dataset.instances)
    chosen = [i.instance_id for i in select(dataset.rows(), shuffle=True, slice_spec=spec)]
    assert chosen == drawn[parse_slice(spec)] and len(chosen) == len(range(3)[parse_slice(spec)])
    mend = [{"instance_id": f"mended__m-{n}", "problem_statement": "m"} for n in (0, 2)]
    mended = load_dataset(str(write_jsonl(tmp_path / "m.jsonl", [ROWS[0], mend[0], ROWS[1], mend[1], ROWS[2]])))
    redrawn = [i.instance_id for i in select(mended.rows(), shuffle=True)]
    assert len(redrawn) == 5 and [i for i in redrawn if i in drawn] == drawn  # mended rows keep the others' order


def test_a_slice_of_malformed_rows_selects_nothing_and_says_so(tmp_path: Path) -> None:
    dataset = str(write_jsonl(tmp_path / "d.jsonl", NUMBERED))
    args = ["--subset", dataset, "--slice", "2:3", "--environment", "local", "--model", "scripted:none.yaml", "-o", "o"]
    done = invoke("swebench", *args, cwd=tmp_path, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "error: no instance selected: --slice '2:3' matches none of the 3 instances (5 rows, 2 malformed)"
    )
    warned = [line for line in done.stderr.splitlines() if line.startswith("skipping malformed row ")]
    assert [line.split(":")[0] for line in warned] == [
        "skipping malformed row 0 (bad__statement-1)",
        "skipping malformed row 2",
    ]
