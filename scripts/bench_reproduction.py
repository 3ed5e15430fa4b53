#!/usr/bin/env python
"""Reproduction first (issue 25): which signal picks the patch that resolves the task, and what running the patches
costs per attempt.

Side by side in one run, on small git repositories in the local environment (no tools), with scripted models: each
task has three attempts — two wrong patches the reviewer scores high (one edits the README and leaves the bug, one
makes the reproduction pass but breaks a test of the repository that passed before) and the right one it scores low;
the chooser model picks a wrong one. Three modes of `run_attempts` (attempts.max=3, no early acceptance):
(a) no reproduction: the review signal (the best score) and the chooser model's pick;
(b) the reproduction script given with the task: every patch run against it and the repository's tests in a clean
    worktree, the choice narrowed by execution (its pick: the attempts ranked best, when they are fewer than all);
(c) the agent writes the reproduction test itself before its first step (`reproduction.generate`, validated on the
    original code), the tests of all attempts pooled, then as in (b).
Resolved: the task's hidden test (never in the repository, never shown) passes on the patch, as the official harness
would say. Extra cost per attempt: (b)/(c)'s wall time minus (a)'s, over the three attempts, and (c)'s writing calls
priced at `--price-model`'s price (their tokens as the scripted model reports them).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.priced import find_price
from llm_ide.reproduction.script import script
from llm_ide.reproduction.variant import Reproduction

console = Console(highlight=False, width=140)


@dataclass(frozen=True)
class Task:
    name: str
    files: dict[str, str]
    statement: str
    reproduction: str
    hidden: str  # the hidden tests (the issue's, and the repository's that passed): exit 0 on a resolved patch
    readme: str  # wrong: a note in the README, the bug left
    breaking: str  # wrong: the reproduction passes, a test that passed before fails
    right: str


TASKS = [
    Task(
        "calc",
        {
            "calc.py": "def double(x):\n    return x + x + 1  # BUG\n\n\ndef triple(x):\n    return x + x + x\n",
            "tests/test_calc.py": "import calc\n\n\ndef test_double_keeps_floats():\n"
            "    assert isinstance(calc.double(2.5), float)\n\n\ndef test_triple():\n    assert calc.triple(2) == 6\n",
            "README.md": "calc\n",
        },
        "double(2) returns 5 instead of 4; fix calc.double.",
        "import calc\n\nprint('double(2) =', calc.double(2))\n"
        "print('Issue resolved' if calc.double(2) == 4 else 'Issue reproduced')\n",
        "import calc\n\nassert calc.double(2) == 4 and calc.double(0.5) == 1.0\nassert calc.triple(2) == 6\n",
        "printf 'double() is known to add one\\n' >> README.md",
        "sed -i 's/return x + x + 1  # BUG/return 4/' calc.py",
        "sed -i 's/ + 1  # BUG//' calc.py",
    ),
    Task(
        "text",
        {
            "text.py": "def split_words(s):\n    return s.split()\n\n\ndef shout(s):\n"
            "    return ' '.join(w.upper() for w in split_words(s)) + '!'\n\n\ndef last_word(s):\n"
            "    words = split_words(s)\n    return words[len(words) - 1 + 1]  # BUG\n",
            "tests/test_text.py": "import text\n\n\ndef test_shout():\n"
            "    assert text.shout('hi  there') == 'HI THERE!'\n",
            "README.md": "text\n",
        },
        "last_word('a b') raises IndexError instead of returning 'b'.",
        "import text\n\ntry:\n    word = text.last_word('a b')\nexcept IndexError as error:\n"
        "    print('IndexError:', error)\n    print('Issue reproduced')\nelse:\n"
        "    print('Issue resolved' if word == 'b' else 'Issue reproduced')\n",
        "import text\n\nassert text.last_word('a b') == 'b' and text.last_word('x') == 'x'\n"
        "assert text.shout('hi  there') == 'HI THERE!'\n",
        "printf 'last_word needs two words\\n' >> README.md",
        "sed -i -e 's/return s.split()/return s.split(\" \")/' -e 's/words\\[len(words) - 1 + 1\\]/words[-1]/' text.py",
        "sed -i 's/ + 1\\]  # BUG/]/' text.py",
    ),
    Task(
        "stock",
        {
            "stock.py": "def count(items):\n    return len(items)\n\n\ndef total(items):\n"
            "    return sum(q for _, q in items) + 1  # BUG\n",
            "tests/test_stock.py": "import stock\n\n\ndef test_count():\n    assert stock.count([('a', 2)]) == 1\n\n\n"
            "def test_total_empty_is_an_int():\n    assert isinstance(stock.total([]), int)\n",
            "README.md": "stock\n",
        },
        "total([('a', 2), ('b', 3)]) returns 6 instead of 5.",
        "import stock\n\nvalue = stock.total([('a', 2), ('b', 3)])\nprint('total =', value)\n"
        "print('Issue resolved' if value == 5 else 'Issue reproduced')\n",
        "import stock\n\nassert stock.total([('a', 2), ('b', 3)]) == 5 and stock.total([('c', 7)]) == 7\n"
        "assert isinstance(stock.total([]), int)\n",
        "printf 'total() counts one extra\\n' >> README.md",
        "sed -i 's/return sum(q for _, q in items) + 1  # BUG/"
        "return sum(q for _, q in items) - 0.0 if items else None/' stock.py",
        "sed -i 's/ + 1  # BUG//' stock.py",
    ),
]


def act(thought: str, action_type: str, **params: Any) -> str:
    return (f"<thought>{thought}</thought>\n<action_type>{action_type}</action_type>\n"
            f"<action_params>{json.dumps(params)}</action_params>")  # fmt: skip


def reflect(summary: str) -> str:
    return f"<bad_action>false</bad_action>\n<lessons></lessons>\n<summary>{summary}</summary>"


def attempt_script(fix: str, test: str | None) -> list[str]:
    """(The reproduction test it writes,) the fix, a submit."""
    written = [f"<reproduction>\n{test}</reproduction>"] if test is not None else []
    return [*written, act("Apply the fix.", "bash", command=fix), reflect("Applied."), act("Done.", "submit")]


def write(path: Path, responses: list[str]) -> None:
    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False))


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=repo, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout


def make_repo(path: Path, task: Task) -> Path:
    for name, text in task.files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def resolved(repo: Path, patch: str, hidden: str, folder: Path) -> bool:
    """The hidden test on a checkout of the base commit with `patch` applied (the harness's verdict)."""
    checkout = folder / f"check-{abs(hash(patch))}"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), "HEAD")
    try:
        if patch.strip():
            subprocess.run(["git", "apply"], input=patch, text=True, cwd=checkout, check=True)
        (checkout / "hidden_test.py").write_text(hidden)
        return subprocess.run([sys.executable, "hidden_test.py"], cwd=checkout, capture_output=True).returncode == 0
    finally:
        git(repo, "worktree", "remove", "--force", str(checkout))


@dataclass
class Outcome:
    seconds: float
    attempts: list[dict[str, Any]]
    choice: dict[str, Any]
    writing_calls: int
    writing_tokens: tuple[int, int]


def run_mode(root: Path, task: Task, mode: str, order: list[str], regression_command: str) -> Outcome:
    fixes = {"readme": task.readme, "breaking": task.breaking, "right": task.right}
    scores = {"readme": 9, "breaking": 8, "right": 4}
    folder = root / f"{task.name}-{mode}"
    scripts = folder / "scripts"
    scripts.mkdir(parents=True)
    test = task.reproduction if mode == "generated" else None
    for number, kind in enumerate(order, 1):
        write(scripts / f"a{number}.yaml", attempt_script(fixes[kind], test))
    write(scripts / "areview.yaml", [f"<score>{scores[kind]}</score>\n<reasons>{kind}</reasons>" for kind in order])
    wrong = 1 + order.index("readme")  # the chooser's pick: a wrong one (candidates in attempt order)
    write(scripts / "achoose.yaml", [f"<choice>{wrong}</choice>\n<reasons>It documents the issue.</reasons>"])
    settings = load_config(
        "default", environment={"tools": []}, attempts={"max": 3, "accept_score": None},
        reproduction={"generate": mode == "generated", "regression_command": regression_command},
    )  # fmt: skip
    variants = [Reproduction(script(task.reproduction))] if mode == "given" else []
    repo = make_repo(folder / "repo", task)
    started = time.perf_counter()
    result = run_attempts(task.statement, model=f"scripted:{scripts}/a{{attempt}}.yaml", settings=settings,
                          output_dir=folder / "out", run_id=task.name, repo=repo, variants=variants)  # fmt: skip
    seconds = time.perf_counter() - started
    assert result.exit_status == "submitted" and len(result.attempts) == 3, (task.name, mode, result.error)
    data = json.loads(result.trajectory_path.read_text())
    writing = [call for call in data["model_calls"] if call["kind"] == "write_reproduction"]
    tokens = (sum(c.get("prompt_tokens", 0) for c in writing), sum(c.get("response_tokens", 0) for c in writing))
    for attempt in result.attempts:
        attempt["resolved"] = resolved(repo, attempt["submission"], task.hidden, folder)
    return Outcome(seconds, result.attempts, data["info"]["choice"], len(writing), tokens)


def picks(outcome: Outcome) -> dict[str, list[int]]:
    best = max(outcome.attempts, key=lambda a: (a["score"] or 0.0, -a["index"]))
    execution = outcome.choice.get("execution", [])  # absent: no attempt was verified
    return {"review": [best["index"]], "chooser": [outcome.choice["attempt"]], "execution": execution}


def main(
    runs: Annotated[int, typer.Option(help="Repetitions of every task and mode (median times).")] = 2,
    price_model: Annotated[str, typer.Option(help="Whose price (default.yaml) turns tokens into USD.")] = "gpt-5-mini",
    quick: Annotated[bool, typer.Option(help="One task, one run: what the test suite runs.")] = False,
) -> None:
    tasks = TASKS[:1] if quick else TASKS
    runs = 1 if quick else runs
    price = find_price(price_model, load_config("default").model.prices)
    assert price is not None, f"no price for {price_model}"
    # this interpreter has pytest; the plugins of llm-ide's own environment are not the tiny repositories' business
    regression_command = (
        f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -rA -p no:cacheprovider -q {{{{ files }}}}"
    )
    rows, right, times = [], {"review": 0, "chooser": 0, "execution": 0, "execution (written)": 0}, {}
    extra_usd: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-reproduction-") as tmp:
        for run in range(runs):
            for number, task in enumerate(tasks):
                order = [["readme", "breaking", "right"], ["breaking", "right", "readme"]][number % 2]
                outcomes = {mode: run_mode(Path(tmp) / f"run{run}", task, mode, order, regression_command)
                            for mode in ("none", "given", "generated")}  # fmt: skip
                for mode, outcome in outcomes.items():
                    times.setdefault(mode, []).append(outcome.seconds)
                signals = {**{k: v for k, v in picks(outcomes["none"]).items() if k != "execution"},
                           "execution": picks(outcomes["given"])["execution"],
                           "execution (written)": picks(outcomes["generated"])["execution"]}  # fmt: skip
                status = {a["index"]: a["resolved"] for a in outcomes["none"].attempts}
                for signal, picked in signals.items():
                    ok = bool(picked) and all(status[index] for index in picked)
                    right[signal] += ok
                rows.append((f"{task.name} (run {run + 1})", order, signals, status, outcomes))
                extra_usd.append(price.cost(*outcomes["generated"].writing_tokens) / 3)
    total = len(rows)
    table = Table("task", "attempts (fix: resolved?)", "review picks", "chooser picks", "execution picks",
                  "execution (written tests) picks", title="Which signal picks the resolved patch")  # fmt: skip
    for name, order, signals, status, _ in rows:
        attempts = ", ".join(
            f"{index} {kind}: {'yes' if status[index] else 'no'}" for index, kind in enumerate(order, 1)
        )
        table.add_row(name, attempts, *(", ".join(map(str, signals[s])) or "—" for s in signals))
    console.print(table)
    median = {mode: statistics.median(values) for mode, values in times.items()}
    cost = Table("mode", "wall time (s)", "extra per attempt (s)", "writing calls per attempt",
                 f"extra USD per attempt ({price_model})", title="What running the patches costs")  # fmt: skip
    writing_calls = statistics.mean(row[4]["generated"].writing_calls for row in rows) / 3
    for mode in ("none", "given", "generated"):
        extra = (median[mode] - median["none"]) / 3
        usd = statistics.mean(extra_usd) if mode == "generated" else 0.0
        calls = writing_calls if mode == "generated" else 0.0
        cost.add_row(mode, f"{median[mode]:.2f}", f"{extra:.2f}", f"{calls:.1f}", f"{usd:.6f}")
    console.print(cost)
    rates = {signal: f"{count}/{total}" for signal, count in right.items()}
    extra = {mode: f"{(median[mode] - median['none']) / 3:.2f}" for mode in ("given", "generated")}
    print(
        f"RESULT execution_picks_resolved={rates['execution']} written_execution_picks_resolved="
        f"{rates['execution (written)']} review_picks_resolved={rates['review']} "
        f"chooser_picks_resolved={rates['chooser']} extra_seconds_per_attempt={extra['given']} "
        f"extra_seconds_per_attempt_written={extra['generated']} "
        f"extra_usd_per_attempt_written={statistics.mean(extra_usd):.6f} tasks={total}"
    )


if __name__ == "__main__":
    typer.run(main)
