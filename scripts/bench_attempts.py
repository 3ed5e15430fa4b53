#!/usr/bin/env python
"""Attempts (issue 11): the outer graph's overhead per attempt, and the cost of a 3-attempt run against 3 × one.

Side by side in one run, on a small git repository in the local environment (no tools), with scripted models whose
responses are generated here (`--steps` bash/view operations, then the fix and a submit):
(a) one attempt: `run_task`, `--runs` times; (b) `run_attempts` with attempts.max=3, no early acceptance, three
reviews and one chooser call, `--runs` times.
Outer overhead per attempt: (b)'s wall time minus the wall time of its three agent runs (from the `attempt N` phase
event to that run's `end` event), divided by 3: dispatch, the worktree, the review node, the choice, the outer
checkpoints and the combined trajectory — not the reviewer's and chooser's model latency (scripted: ~0).
Cost: every call's prompt and reply in characters, billed with the gpt profile as the other benchmarks bill
(bench_bill.py: the prefix shared with the previous request a cached re-read), the memory given that price; (b)
counts its attempts (their prompts grow by the carried lessons), reviews and choice. The RESULT holds the bills
themselves beside the ratios. PORTABLE: bench_old_new runs this script on the old package too.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from bench_bill import bill_of, memory_priced
from rich.console import Console
from rich.table import Table

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

console = Console(highlight=False, width=120)
FILES = {
    "calc.py": "def double(x):\n    return x + x + 1  # BUG\n\n\ndef triple(x):\n    return 3 * x\n",
    "test_calc.py": "import calc\n\nassert calc.double(2) == 4, calc.double(2)\nprint('ok')\n",
    "README.md": "calc\n",
}
PORTABLE = True  # bench_old_new runs this script on the old package too (bench_bill.py)
TASK = "double(2) returns 5 instead of 4; fix calc.double."


def act(thought: str, action_type: str, **params: Any) -> str:
    return (f"<thought>{thought}</thought>\n<action_type>{action_type}</action_type>\n"
            f"<action_params>{json.dumps(params)}</action_params>")  # fmt: skip


def reflect(summary: str, lesson: str = "") -> str:
    return f"<bad_action>false</bad_action>\n<lessons>{lesson}</lessons>\n<summary>{summary}</summary>"


def attempt_script(steps: int) -> list[str]:
    responses = []
    for step in range(steps):
        if step % 2:
            responses.append(act(f"Look at the code ({step}).", "view", path="calc.py", start_line=1, end_line=6))
        else:
            responses.append(act(f"Run the test ({step}).", "bash", command="python3 test_calc.py 2>&1 | tail -3"))
        responses.append(reflect(f"Step {step} done.", "Check double() first." if step == 1 else ""))
    responses += [act("Fix it.", "bash", command="sed -i 's/ + 1  # BUG//' calc.py"), reflect("Fixed."),
                  act("Done.", "submit")]  # fmt: skip
    return responses


def write(path: Path, responses: list[str]) -> None:
    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False))


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for name, text in FILES.items():
        (path / name).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit",
                                                                 "-q", "-m", "base"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def billed(calls: list[dict[str, Any]]) -> float:
    return bill_of(calls)[1]


def main(
    steps: Annotated[int, typer.Option(help="Operations of each attempt before its fix.")] = 10,
    runs: Annotated[int, typer.Option(help="Repetitions of each variant (medians are reported).")] = 3,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    if quick:
        steps, runs = 2, 1
    settings = load_config("default", environment={"tools": []}, memory=memory_priced())
    single_times, single_costs, overheads, multi_times, multi_costs, judge_costs = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-attempts-") as tmp:
        root = Path(tmp)
        scripts = root / "scripts"
        scripts.mkdir()
        for number in (1, 2, 3):
            write(scripts / f"a{number}.yaml", attempt_script(steps))
        write(scripts / "areview.yaml", [f"<score>5</score>\n<reasons>Attempt {n} looks plausible.</reasons>"
                                         for n in (1, 2, 3)])  # fmt: skip
        write(scripts / "achoose.yaml", ["<choice>1</choice>\n<reasons>The same fix everywhere.</reasons>"])
        model = f"scripted:{scripts}/a{{attempt}}.yaml"
        multi = settings.merged({"attempts": {"max": 3, "accept_score": None}})
        for run in range(runs):
            repo = make_repo(root / f"single{run}")
            started = time.perf_counter()
            result = run_task(TASK, model=model.replace("{attempt}", "1"), settings=settings,
                              output_dir=root / f"out-single{run}", run_id="one", repo=repo)  # fmt: skip
            single_times.append(time.perf_counter() - started)
            assert result.exit_status == "submitted", result.error
            single_costs.append(billed(load_trajectory(result.trajectory_path)["model_calls"]))

            marks: dict[str, float] = {}

            def on_event(event: Any, marks: dict[str, float] = marks) -> None:
                if event.kind == "phase" and event.phase.startswith("attempt "):
                    marks[f"start{event.phase.split()[1]}"] = time.perf_counter()
                elif event.kind == "end":
                    marks[f"end{event.run_id.rsplit('attempt', 1)[1]}"] = time.perf_counter()

            repo = make_repo(root / f"multi{run}")
            started = time.perf_counter()
            result = run_attempts(TASK, model=model, settings=multi, output_dir=root / f"out-multi{run}",
                                  run_id="three", repo=repo, on_event=on_event)  # fmt: skip
            total = time.perf_counter() - started
            assert [a["index"] for a in result.attempts] == [1, 2, 3] and result.chosen == 1, result.error
            inner = sum(marks[f"end{n}"] - marks[f"start{n}"] for n in (1, 2, 3))
            multi_times.append(total)
            overheads.append((total - inner) / 3)
            data = load_trajectory(result.trajectory_path)
            calls = data["model_calls"]
            multi_costs.append(billed(calls))
            judge_costs.append(billed(calls) - billed([c for c in calls if c["kind"] not in ("review", "choose")]))
    one_time, one_cost = statistics.median(single_times), statistics.median(single_costs)
    three_time, three_cost = statistics.median(multi_times), statistics.median(multi_costs)
    overhead, judge = statistics.median(overheads), statistics.median(judge_costs)
    table = Table("variant", "wall time (s)", "bill (characters, gpt profile)", "vs 3 × one attempt")
    table.add_row("one attempt (run_task)", f"{one_time:.2f}", f"{one_cost:,.0f}", "")
    table.add_row("3 × one attempt", f"{3 * one_time:.2f}", f"{3 * one_cost:,.0f}", "1.00")
    ratio = three_cost / (3 * one_cost)
    table.add_row("3 attempts (run_attempts)", f"{three_time:.2f}", f"{three_cost:,.0f}", f"{ratio:.2f}")
    table.add_row("  of which reviews + choice", "", f"{judge:,.0f}", f"{judge / (3 * one_cost):.2f}")
    table.add_row("  outer graph overhead per attempt", f"{overhead * 1000:.0f} ms", "", "")
    console.print(table)
    print(
        f"RESULT outer_overhead_ms_per_attempt={overhead * 1000:.0f} cost_ratio_3_attempts={ratio:.2f} "
        f"judge_cost_share={judge / three_cost:.3f} time_ratio_3_attempts={three_time / (3 * one_time):.2f} "
        f"one_attempt_bill={one_cost:.0f} three_attempts_bill={three_cost:.0f} judge_bill={judge:.0f} steps={steps}"
    )


if __name__ == "__main__":
    typer.run(main)
