"""What a run writes: each prompt once (the gzip calls log), a trajectory that references it, bytes linear in steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_ide.config import load_config
from llm_ide.run.call_log import CallLog
from llm_ide.run.calls_read import read_log
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import Recorder, load_trajectory

SOURCE = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(150))


def views(steps: int) -> list[str]:
    """`steps` operations: views of the module, the last one a submit."""
    responses = []
    for step in range(steps - 1):
        start = 1 + (step * 37) % 560
        responses += [act(f"Read part {step}.", "view", path="mod.py", start_line=start, end_line=start + 30)]
        responses += [reflect(False, f"part {step} defines simple adders")]
    return [*responses, act("Done.", "submit")]


def run(tmp_path: Path, steps: int) -> tuple[int, Path]:
    """A run of `steps` views with in-memory checkpoints: the bytes its trajectory writer wrote (every rewrite of
    the trajectory, every record of the calls log), and its output folder."""
    repo = make_git_repo(tmp_path / f"repo{steps}", {"mod.py": SOURCE})
    model = write_script(tmp_path / f"script{steps}.yaml", views(steps))
    settings = load_config("default", environment={"tools": []})
    result = run_task("Read mod.py.", model=model, settings=settings, output_dir=tmp_path / f"out{steps}",
                      run_id="d", repo=repo, checkpoint="memory")  # fmt: skip
    assert result.exit_status == "submitted"
    return result.written, tmp_path / f"out{steps}"


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir())


def test_bytes_written_grow_linearly_with_the_steps(tmp_path: Path) -> None:
    """What a run leaves grows linearly with its steps, and what its writer writes stays within a constant multiple
    of that: the trajectory is rewritten after a fifth more steps (a geometric series: at most 1.2 / 0.2 = 6 times
    its final size, plus the final save), each call appended once. Rewriting a trajectory that held every prompt
    after every step wrote twenty times what was left after 40 steps, and ever more with more steps."""
    runs = {steps: run(tmp_path, steps) for steps in (20, 40, 80)}
    left = {steps: folder_bytes(output) for steps, (_, output) in runs.items()}
    written = {steps: runs[steps][0] for steps in runs}
    assert left[80] < 2.3 * left[40] < 2.3**2 * left[20], left
    assert all(written[steps] < 8 * left[steps] for steps in runs), (written, left)
    assert written[80] < 2.3 * written[40] < 2.3**2 * written[20], written


def test_each_prompt_is_stored_once_and_the_trajectory_references_the_log(tmp_path: Path) -> None:
    _, output = run(tmp_path, 12)
    raw = json.loads((output / "d.traj.json").read_text())
    assert raw["info"]["calls_log"] == "d.calls.jsonl.gz"
    assert all("prompt" not in call for call in raw["model_calls"])
    records, finished = read_log(output / "d.calls.jsonl.gz")
    assert finished and [r["index"] for r in records] == list(range(12))  # one call per step
    traj = load_trajectory(output / "d.traj.json")
    assert [call["prompt"] for call in traj["model_calls"]] == [r["prompt"] for r in records]
    assert all(call["prompt"].startswith("[system]\n") for call in traj["model_calls"])
    assert all(len(call["prompt"]) > call["prompt_chars"] > 0 for call in traj["model_calls"])
    assert gzip.decompress((output / "d.calls.jsonl.gz").read_bytes()).count(b"\n") == 12
    assert load_trajectory(str(output / "d.traj.json")) == traj  # a path as text, as the rest of the API takes


def test_a_killed_writer_leaves_every_flushed_call_and_reopening_completes_the_log(tmp_path: Path) -> None:
    path = tmp_path / "r.calls.jsonl.gz"
    log = CallLog(path)
    for index in range(3):
        log.append({"index": index, "prompt": f"{index}: " + "p" * 5000, "response": "r"})
    intact = path.stat().st_size
    log.append({"index": 9, "prompt": "x" * 5000, "response": "torn"})
    with path.open("r+b") as handle:  # the last record's write cut short by the kill
        handle.truncate(intact + (path.stat().st_size - intact) // 2)
    assert [r["index"] for r in read_log(path)[0]] == [0, 1, 2]
    with pytest.raises(EOFError):
        gzip.decompress(path.read_bytes())  # no member is complete
    reopened = CallLog(path)
    assert [r["prompt"][:2] for r in reopened.existing] == ["0:", "1:", "2:"]
    reopened.append({"index": 3, "prompt": "again", "response": "r"})
    reopened.close()
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2, 3]


@pytest.mark.parametrize("reopen_at", [None, 3, 6])
def test_a_logged_prompt_is_its_growth_and_reads_back_whole(tmp_path: Path, reopen_at: int | None) -> None:
    """A prompt that grows by appending is logged as what it adds to the previous one (zcat shows the growth), read
    back whole, also across a reopened log; a prompt that shares little is logged whole."""
    base = "".join(f"line {n}: " + "x" * 60 + "\n" for n in range(2000))  # 140 kB: beyond gzip's 32 kB window
    prompts = [base + "".join(f"step {k}\n" for k in range(step)) for step in range(8)] + ["a new prompt"]
    path = tmp_path / "d.calls.jsonl.gz"
    log, written = CallLog(path), []
    for index, prompt in enumerate(prompts):
        if index == reopen_at:
            log.close()
            log = CallLog(path)
        written.append(log.append({"index": index, "prompt": prompt, "response": "ok"}))
    log.close()
    records, complete = read_log(path)
    assert complete and [record["prompt"] for record in records] == prompts
    assert all("prompt_shared" not in record for record in records)
    assert sum(written[1:8]) < len(gzip.compress(base.encode())) // 4  # each later prompt costs its growth
    raw = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    assert [record.get("prompt_shared") for record in raw] == [None, *(len(prompts[n - 1]) for n in range(1, 8)), None]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(info=st.dictionaries(st.text(), JSON, max_size=5), config=JSON, other=JSON, task=st.text())
def test_the_trajectory_info_is_jsons_own_with_the_settings_encoded_once(
    tmp_path_factory: pytest.TempPathFactory, info: dict, config: object, other: object, task: str
) -> None:
    """The info a rewrite writes (its settings encoded once per run) is `json.dumps`'s, byte for byte, for any
    info: the same settings again, other settings, none, values equal to the ones before but encoded otherwise."""
    recorder = Recorder(tmp_path_factory.mktemp("head"), "r")
    for settings_now in (config, config, other, None, json.loads(json.dumps(other)), 1, True, [1.0], [1], [True]):
        head = {**info, "config": settings_now, "copy": other, "task": task}
        assert recorder._info(head) == json.dumps(head, ensure_ascii=False).encode()
