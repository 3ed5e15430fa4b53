"""Every benchmark runs in its quick mode, so that none rots unseen: `python scripts/bench_X.py --quick` prints its
table and ends with a `RESULT key=value …` line (figures are not checked: a timing never goes in an assertion; the
invariants a benchmark reports about itself are). The full runs stay out of the suite."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import base_image_client, unavailable
from in_process import run_script

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
BENCHMARKS = sorted(path.stem for path in SCRIPTS.glob("bench_*.py") if "typer.run(main)" in path.read_text())
HELPERS = sorted(path.stem for path in SCRIPTS.glob("bench_*.py") if path.stem not in BENCHMARKS)
CHROMIUM = [Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")]
sys.path.insert(0, str(SCRIPTS))
import bench_old_new  # noqa: E402


def needs(benchmark: str, request: pytest.FixtureRequest) -> None:
    """What a benchmark needs besides Python: skipped with the reason when missing (a failure under CI=true)."""
    if benchmark in ("bench_env", "bench_batch", "bench_tools", "bench_ray"):
        base_image_client()
    if benchmark == "bench_ray":
        from pg_server import require_postgres
        from ray_cluster import require_ray

        require_postgres()
        require_ray()
    if benchmark == "bench_inspector" and not all(path.exists() for path in CHROMIUM):
        unavailable("chromium and chromedriver are missing (apt-get install chromium chromium-driver)")
    if benchmark in ("bench_coop", "bench_replay", "bench_old_new_replays"):
        request.getfixturevalue("shared_dir")  # the CooperBench task, the real trajectories live in ../shared


SLOW = {"bench_batch", "bench_cost", "bench_ray", "bench_replay", "bench_step_cpu", "bench_tools"}  # long, quick too
SLOW |= {"bench_old_new", "bench_old_new_replays"}  # benchmarks on two checkouts (one unpacked by git archive)
DOCKER = {"bench_batch", "bench_env", "bench_ray", "bench_tools"}
INVARIANTS = {  # what a quick run reports about itself, whatever the machine's speed
    "bench_attempts": {"steps": "2"},
    "bench_coop": {"pairs": "1", "matches_gold": "1/1"},
    "bench_cost": {"same_tree": "true"},
    "bench_sampling": {"steps": "6", "k1_calls": "11"},
    "bench_step_cpu": {"steps": "25", "rounds": "1"},
    "bench_inspector": {"steps": "20", "operations": "20", "drawn": "20"},
    "bench_replay": {"runs": "2", "same_tree": "2/2"},
    "bench_old_new_replays": {"instances": "2"},
    "bench_reproduction": {"execution_picks_resolved": "1/1", "written_execution_picks_resolved": "1/1", "tasks": "1"},
}

ARGS = {"bench_step_cpu": ["--against", str(SCRIPTS.parent)]}  # its option too: this checkout played as the "old" one
KEYS = {"bench_step_cpu": {"new_old_10", "new_old_20", "new_old_all"}}  # what those arguments add


def marks(benchmark: str) -> list[pytest.MarkDecorator]:
    return [*([pytest.mark.slow] if benchmark in SLOW else []), *([pytest.mark.docker] if benchmark in DOCKER else [])]


@pytest.mark.parametrize("script", [pytest.param(name, marks=marks(name)) for name in BENCHMARKS])
def test_the_quick_mode_prints_a_table_and_a_result_line(script: str, request: pytest.FixtureRequest) -> None:
    needs(script, request)
    if script in SLOW | DOCKER:  # Ray's driver, docker's leftovers at exit: a process of their own (tests/README.md)
        command = [sys.executable, f"{script}.py", "--quick", *ARGS.get(script, [])]
        done = subprocess.run(command, cwd=SCRIPTS, capture_output=True, text=True, timeout=1500)
    else:
        done = run_script(SCRIPTS / f"{script}.py", "--quick", cwd=SCRIPTS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) > 3, done.stdout  # a table before the result
    last = lines[-1]
    assert re.fullmatch(r"RESULT( [a-z0-9_]+=\S+)+", last), last
    figures = dict(pair.split("=", 1) for pair in last.split()[1:])
    assert figures.items() >= INVARIANTS.get(script, {}).items(), last
    assert figures.keys() >= KEYS.get(script, set()), last


def test_every_bench_script_is_a_benchmark_or_a_helper_one_uses() -> None:
    assert len(BENCHMARKS) >= 13 and "bench_env" in BENCHMARKS
    sources = {name: (SCRIPTS / f"{name}.py").read_text() for name in BENCHMARKS}
    for benchmark, source in sources.items():
        assert "--quick" in source or "quick:" in source, f"{benchmark} has no quick mode"
    for helper in HELPERS:
        assert any(helper in source for source in sources.values()), f"{helper}.py is used by no benchmark"


@pytest.mark.parametrize(
    ("script", "key", "old", "new", "verdict"),
    [
        ("bench_context", "cold_ratio", "0.174", "0.227", "timing"),  # declared by the benchmark (TIMED)
        ("bench_ray", "ray_node_ratio", "0.895", "0.566", "timing"),
        ("bench_ray", "wall_ray1_s", "10.58", "15.51", "timing"),  # said by its name
        ("bench_ray", "pg_bytes_per_instance", "307200", "356352", "differs ×1.16"),
        ("bench_cost", "gpt_disk_ratio", "1.85", "2.11", "differs ×1.14"),
        ("bench_context", "cold_ratio", "0.174", "0.174", "same"),
    ],
)
def test_old_new_judges_a_timing_a_benchmark_declares_as_timing(
    script: str, key: str, old: str, new: str, verdict: str
) -> None:
    declared = bench_old_new.declared_timing(SCRIPTS / f"{script}.py")
    assert bench_old_new.compare(old, new, key, declared) == verdict


def test_every_declared_timing_is_a_key_its_benchmark_prints() -> None:
    declared = {name: bench_old_new.declared_timing(SCRIPTS / f"{name}.py") for name in BENCHMARKS}
    declaring = {name for name, keys in declared.items() if keys}
    assert {"bench_context", "bench_batch", "bench_env", "bench_ray"} <= declaring
    for name, keys in declared.items():
        source = (SCRIPTS / f"{name}.py").read_text()
        assert all(f"{key}={{" in source for key in keys), (name, keys)


@pytest.mark.parametrize(
    ("profile", "bill"),
    [  # "abcd" new; "abcdef" shares 4; "xy" shares none (the previous request's prefix only)
        ("gpt", 4 * 1.0 + 1 * 8.0 + (2 * 1.0 + 4 * 0.1 + 2 * 8.0) + 2 * 1.0),
        ("claude55", 4 * 1.25 + 1 * 5.0 + (2 * 1.25 + 4 * 0.05 + 2 * 5.0) + 2 * 1.25),
    ],
)
def test_the_benchmarks_bill_prices_the_prefix_shared_with_the_previous_request_as_a_reread(
    profile: str, bill: float
) -> None:
    import bench_bill

    from llm_ide.pricing import PROFILES

    calls = [{"prompt": "abcd", "response": "o"}, {"prompt": "abcdef", "response": "oo"}, {"prompt": "xy"}]
    raw, billed, out = bench_bill.bill_of(calls, PROFILES[profile])
    assert (raw, out) == (12, 3)
    assert billed == pytest.approx(bill)
    price = PROFILES[profile]
    full = bench_bill.appended_bill([4, 10, 13], [1, 2, 0], price)  # a full history: each prompt the last one and more
    assert full == pytest.approx(bench_bill.bill_of([{"prompt": "a" * n, "response": "o" * r} for n, r in
                                                     [(4, 1), (10, 2), (13, 0)]], price)[1])  # fmt: skip


def test_a_portable_benchmark_gives_the_memory_the_price_it_bills_with() -> None:
    import bench_bill
    import bench_sampling

    from llm_ide.config import load_config

    assert bench_old_new.declared(SCRIPTS / "bench_sampling.py", "PORTABLE", False) is True
    assert bench_old_new.declared(SCRIPTS / "bench_cost.py", "PORTABLE", False) is False
    memory = load_config("default", memory=bench_bill.memory_priced()).memory
    assert (memory.unpriced.input, memory.unpriced.cache_read, memory.unpriced.output) == (1.0, 0.1, 8.0)
    assert load_config("default").memory.unpriced.cache_read == 0.02  # the default is another price: it is given
    settings = bench_sampling.settings_for(6, {"k": 3, "choice": "pairwise"})
    assert settings.memory.unpriced == memory.unpriced and settings.sampling.k == 3


def replay_report(steps: list[tuple[int, int, int]], mini: tuple[int, int, int] = (1000, 0, 10), rc: int = 0) -> str:
    """A replay.json of llm-ide's (raw, cached, output) per step, the original's the same at every step."""
    parts = lambda raw, cached, out: {"raw": raw, "cached": cached, "output": out}  # noqa: E731
    rows = [
        {"step": n, "agents": {"llm-ide": parts(*ours), "original": parts(*mini)}} for n, ours in enumerate(steps, 1)
    ]
    return json.dumps({"steps": rows, "differing_returncodes": list(range(rc)), "same_as_submission": True})


def test_old_new_replays_bill_each_step_under_the_profile_and_say_why_the_bill_moved(tmp_path: Path) -> None:
    import bench_old_new_replays as replays

    old_steps = [(1000, 0, 10), (1200, 1000, 10), (600, 100, 10), (800, 600, 10)]  # rewritten at step 3
    new_steps = [(1000, 0, 10), (1200, 1000, 10), (1400, 1200, 10), (1600, 1400, 10)]  # grows like full history
    for name, steps in (("old", old_steps), ("new", new_steps)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "replay.json").write_text(replay_report(steps))
    old = replays.read_report(tmp_path / "old" / "replay.json", "claude55")
    new = replays.read_report(tmp_path / "new" / "replay.json", "gpt")
    assert old is not None and new is not None
    # claude55: an uncached character is written to the cache (1.25), a re-read 0.05, output 5
    assert old.ours.bill == pytest.approx(1.25 * (1000 + 200 + 500 + 200) + 0.05 * 1700 + 5 * 40)
    assert new.ours.bill == pytest.approx(1000 + 200 + 200 + 200 + 0.1 * 3600 + 8 * 40)
    assert (old.ours.rewrites, new.ours.rewrites, old.steps) == ((3,), (), 4)
    old = replays.read_report(tmp_path / "old" / "replay.json", "gpt")
    assert old is not None
    assert replays.why(old, new).startswith("fewer rewrites (sent +44%, uncached -16%)")
    assert replays.why(old, old) == "same"
    assert replays.read_report(tmp_path / "none.json", "gpt") is None
    table = replays.markdown({"gpt": {"a": {"old": old, "new": new}, "b": {"old": old, "new": None}}})
    rows = table.splitlines()[2:]
    assert rows[0].startswith(f"| a | 4 | {new.ours.bill / old.ours.bill:.3f} | gpt: fewer rewrites")
    assert rows[0].endswith("(rewritten at 3 / none) |") and rows[1] == "| b |  | — |  |"


def test_old_new_replays_say_a_replay_that_is_not_the_same_run() -> None:
    import bench_old_new_replays as replays

    figures = replays.Figures(bill=100.0, raw=1000, uncached=100, output=10, rewrites=())
    old = replays.Replayed(steps=4, ours=figures, mini=figures, returncodes=0, same_tree=True)
    other = replays.Replayed(steps=5, ours=figures, mini=figures, returncodes=2, same_tree=False)
    said = replays.why(old, other)
    assert said.startswith("mini's bill differs (4 / 5 steps)") and "same;" in said
    assert "otherwise than the original at 0 / 2 steps" in said and "same tree True / False" in said


def test_the_price_lists_a_benchmark_gives_an_older_package_are_the_profiles() -> None:
    import ast

    from llm_ide.pricing import PROFILES, Price

    source = (SCRIPTS / "bench_bill.py").read_text()
    fallback = next(node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ExceptHandler))
    namespace: dict[str, object] = {"Price": Price}  # the lists an older package gets, run on their own
    exec(compile(ast.Module(body=fallback.body, type_ignores=[]), "bench_bill", "exec"), namespace)
    assert namespace["PROFILES"] == PROFILES


@pytest.mark.parametrize(
    ("script", "args", "says"),
    [
        (
            "bench_old_new",
            ["--old", "no-such-rev", "--only", "bench_context"],
            "no-such-rev: neither a folder nor a revision",
        ),
        ("bench_session", ["--quick", "--prices", "gtp"], "--prices: gpt, claude55, open, not gtp"),
        ("bench_old_new", ["--old", str(SCRIPTS.parent), "--only", "sampling"], "--only sampling: no such benchmark"),
        ("bench_old_new_replays", ["--old", str(SCRIPTS.parent), "--only", "x-1"], "--only x-1: no such trajectory"),
    ],
)
def test_an_old_revision_a_price_profile_or_a_benchmark_that_is_not_there_is_said_without_a_traceback(
    script: str, args: list[str], says: str, request: pytest.FixtureRequest
) -> None:
    needs(script, request)
    done = run_script(SCRIPTS / f"{script}.py", *args, cwd=SCRIPTS)
    assert done.returncode in (1, 2) and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert says in " ".join(done.stderr.split()) and done.stdout == "", done.stderr[-2000:]
