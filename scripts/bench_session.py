#!/usr/bin/env python
"""Long scripted sessions over real code (the standard library): prompt size, agent machinery time, checkpoint size.

One run plays two sessions of the full agent (local environment, sqlite checkpoints, trajectory after every step) with
a scripted model whose responses are generated here: views of ranges, view_symbol, searches, `sed -n`/`grep` through
bash, edits of which some are then reflected bad and reverted as the alternative, compile checks, grounded references
in every thought. The sessions are 100 and 200 operations long (the same first 99 operations) over a git repository
holding copies of big standard-library modules (a ~4,600- and a ~6,400-line file among them).

(a) prompt size: our prompt per step (the `act` call; also `reflect` + `act`) from the trajectory's model_calls,
    against the full-history prompt a mini-swe-agent-style agent would send after the same operations: the same
    system and task text + every action response + every observation (wrapped as mini-swe-agent does, head+tail
    truncated at 10,000 characters). Anchor: the context size at the last step of real mini-swe-agent trajectories
    in ../shared/data/trajectories/mini-swe-agent/ when present.
(b) machinery per step: wall time between two step events minus the step's model-call time (model_calls[].seconds)
    minus the action's execution time (operations[].duration). "in-process actions" also counts the time of actions
    that run no command (view, view_symbol, edit: file reads and tree-sitter scopes) as machinery.
(c) checkpoint database size (sqlite file + WAL) at steps 50/100/200 of the 200-step session.
When the machinery median is above 10 ms (or with --profile), a third 100-step session runs under cProfile and the
top costs are printed.
"""

from __future__ import annotations

import ast
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import statistics
import subprocess
import sysconfig
import tempfile
import threading
import time
import tokenize
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.prompting import render
from llm_ide.run.single import RunEvent, run_task
from llm_ide.run.trajectory import load_trajectory

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["typing.py", "argparse.py", "email/_header_value_parser.py", "tkinter/__init__.py", "_pydecimal.py"]
TRAJECTORIES = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "mini-swe-agent"
PROMPT_MARKS = (10, 30, 50, 100)
SIZE_MARKS = (50, 100, 200)
WINDOW = range(91, 101)  # "at step 100": the machinery figures of steps 91..100
MINI_TRUNCATE = 10_000  # mini-swe-agent shows head 5,000 + tail 5,000 characters of longer outputs, plus a warning
MINI_WARNING_CHARS = 420
TASK = (
    "Audit the argument and header parsing helpers in this repository for places where a value is converted twice or "
    "a default is applied in the wrong order. Read the relevant code, annotate each suspicious statement with a short "
    "comment where the value is computed (behaviour must not change), check that every touched module still compiles, "
    "and submit."
)

# The scripted model's words (a benchmark fixture, not a prompt): sentences that thoughts, summaries and lessons are
# assembled from. Placeholders: {ref} a grounded reference, {sym} a symbol, {name} its short name, {path}, {a}-{b}.
CONTEXT = [
    "Earlier I saw that `{name}` is assigned before it is checked{ref}, so the order of these statements matters.",
    "The branch I read last{ref} only runs when the value is already normalised, which narrows where the problem is.",
    "`{name}` is used by the code I viewed before{ref}; its callers rely on the return value staying as it is.",
    "From the previous observation, the error path{ref} is reached only for malformed input, not for the defaults.",
    "The loop over the parsed tokens{ref} keeps its state in locals, so nothing leaks between calls there.",
    "The default handling{ref} converts the value with the same helper the caller already applied.",
]
PURPOSE = {
    "view": "Next I read lines {a}-{b} of {path} around `{sym}`{ref} to see the surrounding logic and its helpers.",
    "view_symbol": "I open the whole definition of `{sym}`{ref}: its body decides how the arguments are validated.",
    "search": "I search for `{name}` across the modules to find every place that depends on `{sym}`{ref}.",
    "sed": "A `sed -n` over lines {a}-{b} of {path} shows the part of `{sym}`{ref} that I have not read yet.",
    "grep": "Grepping {path} for `{name}` lists the call sites of `{sym}`{ref} with their line numbers.",
    "defs": "Listing every definition in {path} gives me the module's layout before I go deeper into `{sym}`{ref}.",
    "edit": "I annotate the statement at line {a}{ref} in `{sym}` where the value is computed; behaviour is unchanged.",
    "revert": "The annotation at line {a}{ref} was in the wrong place; I restore the original statement instead.",
    "compile": "Compiling {path} checks that the annotations so far{ref} keep the module importable.",
    "git": "Listing the changed files confirms which annotations are still in the working tree.",
    "miss": "I look for a helper named `{name}` that might already implement this check near `{sym}`{ref}.",
}
HYPOTHESIS = [
    "My working hypothesis is that the caller passes an already converted value, so the conversion here runs twice.",
    "If that is right, the annotation belongs in the caller rather than in `{name}` itself.",
    "I expect this to confirm that the default is applied exactly once, after the explicit value is checked.",
    "This should tell whether the state is shared between instances or rebuilt on every call.",
    "Should the output contradict this, I will go back to the parser and check the other branch first.",
]
FACTS = [
    "delegates the parsing to a helper and only normalises the result",
    "returns early for empty input before any conversion happens",
    "keeps a cache keyed by its arguments, so repeated calls are cheap",
    "raises TypeError for unsupported operands instead of converting them",
    "applies the default only when no explicit value was given",
    "walks the tokens once and builds the result incrementally",
]
LESSONS = [
    "Search for the exact name before assuming a helper exists.",
    "Annotate a statement only after reading its callers.",
    "A view that does not contain the symbol's body wastes a step; use view_symbol instead.",
    "Check that a hypothesis names a concrete line before acting on it.",
]


@dataclass(frozen=True)
class Symbol:
    path: str
    qualname: str
    start: int
    end: int

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def symbols_of(path: str, text: str) -> list[Symbol]:
    """Top-level functions and classes and the methods of top-level classes, with their line spans."""
    found: list[Symbol] = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append(Symbol(path, node.name, node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    qualname = f"{node.name}.{item.name}"
                    found.append(Symbol(path, qualname, item.lineno, item.end_lineno or item.lineno))
    return found


def one_line_statements(text: str) -> set[int]:
    """Lines holding a whole logical line (a comment can be appended to them without changing the code)."""
    lines: set[int] = set()
    first: int | None = None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            continue
        if token.type == tokenize.NEWLINE:
            if first == token.start[0]:
                lines.add(first)
            first = None
        elif first is None:
            first = token.start[0]
    return lines


def make_repo(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name in FILES:
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / name, target)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "stdlib copies"]):
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=directory, check=True)
    return directory


def act(thought: str, action_type: str, **params: Any) -> str:
    """The action format: the thought, then the action's tag holding its JSON parameters."""
    return f"{thought}\n<{action_type}>{json.dumps(params) if params else ''}</{action_type}>"


def reflect(bad: bool, summary: str, lessons: str = "") -> str:
    """The reflection format: `good:`/`bad:` and one short sentence; a `lesson:` line only when there is a lesson."""
    lesson = f"\nlesson: {lessons}" if lessons else ""
    return f"{'bad' if bad else 'good'}: {summary}{lesson}"


@dataclass
class Planned:
    kind: str
    response: str
    summary: str
    bad: bool = False
    revert: tuple[str, int, str, str] | None = None  # (path, line, annotated, original) to undo next


@dataclass
class SessionWriter:
    """Generates a realistic, deterministic session: investigations of one symbol at a time."""

    repo: Path
    rng: random.Random
    texts: dict[str, list[str]] = field(default_factory=dict)
    safe: dict[str, set[int]] = field(default_factory=dict)
    symbols: list[Symbol] = field(default_factory=list)
    seen: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=40))
    focus: Symbol | None = None
    focus_left: int = 0
    edited: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for name in FILES:
            text = (self.repo / name).read_text(encoding="utf-8")
            self.texts[name] = text.split("\n")
            self.safe[name] = one_line_statements(text)
            self.symbols += [s for s in symbols_of(name, text) if 4 <= s.end - s.start + 1 <= 120]

    def ref(self, refs: list[str], path: str, line: int) -> str:
        refs.append(f"{path}:{line}")
        return f"[{len(refs)}]({path}:{line})"

    def thought(self, kind: str, sym: Symbol, **values: Any) -> str:
        refs: list[str] = []
        sentences = []
        for _ in range(self.rng.choice((0, 1, 1, 2))):
            if self.seen:
                path, line = self.rng.choice(list(self.seen))
                context = self.rng.choice(CONTEXT)
                sentences.append(context.format(name=sym.name, ref=self.ref(refs, path, line)))
        line = values["a"] if kind in ("edit", "revert") else sym.start
        ref = self.ref(refs, sym.path, line) if "{ref}" in PURPOSE[kind] else ""
        sentences.append(PURPOSE[kind].format(sym=sym.qualname, name=sym.name, path=sym.path, ref=ref, **values))
        sentences += [h.format(name=sym.name) for h in self.rng.sample(HYPOTHESIS, self.rng.choice((0, 1, 1)))]
        return " ".join(sentences)

    def summary(self, kind: str, sym: Symbol, **values: Any) -> str:
        fact = self.rng.choice(FACTS)
        where = f"{sym.path}:{values.get('a', sym.start)}-{values.get('b', sym.end)}"
        self.rng.random()  # the draw of an earlier two-sentence summary: keeps the generated sessions as they were
        return f"`{sym.qualname}` ({where}) {fact}."

    def next_focus(self) -> Symbol:
        if self.focus is None or self.focus_left <= 0:
            same_file = [s for s in self.symbols if self.focus and s.path == self.focus.path]
            pool = same_file if same_file and self.rng.random() < 0.6 else self.symbols
            self.focus, self.focus_left = self.rng.choice(pool), self.rng.randint(4, 7)
        self.focus_left -= 1
        return self.focus

    def step(self, previous: Planned | None) -> Planned:
        if previous is not None and previous.bad and previous.revert:
            return self.revert(previous.revert)
        sym = self.next_focus()
        kind = self.rng.choices(
            ["view", "view_symbol", "search", "sed", "grep", "edit", "compile", "git", "defs", "miss"],
            weights=[24, 16, 12, 11, 11, 11, 6, 3, 2, 4],
        )[0]
        return getattr(self, f"plan_{kind}")(sym)

    def seen_range(self, path: str, a: int, b: int) -> None:
        for line in sorted(self.rng.sample(range(a, b + 1), min(3, b - a + 1))):
            self.seen.append((path, line))

    def plan_view(self, sym: Symbol) -> Planned:
        total = len(self.texts[sym.path])
        a = max(1, sym.start - self.rng.randint(0, 12))
        b = min(total, a + self.rng.randint(40, 110))
        thought = self.thought("view", sym, a=a, b=b)
        self.seen_range(sym.path, a, b)
        response = act(thought, "view", path=sym.path, start_line=a, end_line=b)
        return Planned("view", response, self.summary("view", sym, a=a, b=b), self.rng.random() < 0.08)

    def plan_view_symbol(self, sym: Symbol) -> Planned:
        response = act(self.thought("view_symbol", sym), "view_symbol", path=sym.path, symbol=sym.qualname)
        self.seen_range(sym.path, sym.start, sym.end)
        return Planned("view_symbol", response, self.summary("view_symbol", sym))

    def plan_search(self, sym: Symbol) -> Planned:
        pattern = rf"\b{sym.name}\("
        response = act(self.thought("search", sym), "search", pattern=pattern, path="*.py")
        return Planned("search", response, self.summary("search", sym))

    def plan_sed(self, sym: Symbol) -> Planned:
        a = self.rng.randint(sym.start, max(sym.start, sym.end - 10))
        b = min(len(self.texts[sym.path]), a + self.rng.randint(20, 60))
        self.seen_range(sym.path, a, b)
        command = f"sed -n '{a},{b}p' {sym.path}"
        return Planned(
            "sed", act(self.thought("sed", sym, a=a, b=b), "bash", command=command), self.summary("sed", sym)
        )

    def plan_grep(self, sym: Symbol) -> Planned:
        command = f"grep -n '{sym.name}' {sym.path} | head -40"
        return Planned("grep", act(self.thought("grep", sym), "bash", command=command), self.summary("grep", sym))

    def plan_defs(self, sym: Symbol) -> Planned:
        command = f"grep -n 'def ' {sym.path}"
        return Planned("defs", act(self.thought("defs", sym), "bash", command=command), self.summary("defs", sym))

    def plan_compile(self, sym: Symbol) -> Planned:
        path = self.rng.choice(sorted(self.edited)) if self.edited else sym.path
        line = self.rng.randint(1, len(self.texts[path]))
        command = f"python3 -m py_compile {path} && echo compiled {path}"
        thought = self.thought("compile", Symbol(path, sym.qualname, line, line))
        return Planned("compile", act(thought, "bash", command=command), f"{path} still compiles.")

    def plan_git(self, sym: Symbol) -> Planned:
        response = act(self.thought("git", sym), "bash", command="git status --short && git diff --stat")
        return Planned("git", response, f"{len(self.edited)} file(s) carry annotations so far.")

    def plan_miss(self, sym: Symbol) -> Planned:
        name = f"_{sym.name.strip('_')}_already_converted"
        response = act(self.thought("miss", Symbol(sym.path, name, sym.start, sym.end)), "search", pattern=name)
        return Planned("miss", response, f"No helper named `{name}` exists.", True)

    def plan_edit(self, sym: Symbol) -> Planned:
        lines = self.texts[sym.path]
        text = "\n".join(lines)
        candidates = [
            n
            for n in range(sym.start + 1, sym.end + 1)
            if n in self.safe[sym.path]
            and lines[n - 1].strip()
            and "# reviewed" not in lines[n - 1]
            and text.count(lines[n - 1] + "\n") == 1
        ]
        if not candidates:
            return self.plan_view_symbol(sym)
        n = self.rng.choice(candidates)
        original = lines[n - 1]
        annotated = f"{original}  # reviewed: value computed here"
        lines[n - 1] = annotated
        self.edited.add(sym.path)
        self.seen.append((sym.path, n))
        thought = self.thought("edit", sym, a=n)
        response = act(thought, "edit", path=sym.path, old=original + "\n", new=annotated + "\n")
        bad = self.rng.random() < 0.35
        summary = f"Annotated line {n} of {sym.path} inside `{sym.qualname}`."
        return Planned("edit", response, summary, bad, (sym.path, n, annotated, original) if bad else None)

    def revert(self, undo: tuple[str, int, str, str]) -> Planned:
        path, n, annotated, original = undo
        self.texts[path][n - 1] = original
        sym = next((s for s in self.symbols if s.path == path and s.start <= n <= s.end), Symbol(path, path, n, n))
        response = act(self.thought("revert", sym, a=n), "edit", path=path, old=annotated + "\n", new=original + "\n")
        return Planned("revert", response, f"Restored line {n} of {path}.")


def session_script(repo: Path, steps: int, seed: int) -> list[str]:
    """2·steps − 1 responses: `steps` actions (the last one submits) and a reflection between each two."""
    writer = SessionWriter(repo, random.Random(seed))
    responses: list[str] = []
    previous: Planned | None = None
    for _ in range(steps - 1):
        planned = writer.step(previous)
        if previous is not None:
            lessons = writer.rng.choice(LESSONS) if previous.bad else ""
            responses.append(reflect(previous.bad, previous.summary, lessons))
        responses.append(planned.response)
        previous = planned
    assert previous is not None
    responses.append(reflect(previous.bad, previous.summary))
    responses.append(act("All suspicious statements are annotated and every module compiles; submit.", "submit"))
    return responses


class ThreadProfiler:
    """cProfile in the calling thread and in every thread started while it is on (LangGraph runs nodes in a pool)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start_in_thread(self, *_: object) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> ThreadProfiler:
        main = cProfile.Profile()
        self.profiles.append(main)
        threading.setprofile(self._start_in_thread)
        main.enable()
        return self

    def __exit__(self, *_: object) -> None:
        threading.setprofile(None)
        self.profiles[0].disable()

    def stats(self) -> pstats.Stats:
        return pstats.Stats(*[profile for profile in self.profiles if profile.getstats()])


@dataclass
class Session:
    steps: int
    traj: dict[str, Any]
    step_times: dict[int, float]
    sizes: dict[int, tuple[int, int, int, int]]  # step → (db, WAL, latest checkpoint, trajectory JSON) bytes
    exit_status: str
    seconds: float


def db_sizes(path: Path) -> tuple[int, int, int]:
    wal = path.with_name(path.name + "-wal")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT length(checkpoint) FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0, row[0] if row else 0


def run_session(workdir: Path, steps: int, seed: int, profiler: ThreadProfiler | None = None) -> Session:
    name = f"session-{steps}{'-profiled' if profiler else ''}"
    repo = make_repo(workdir / name / "repo")
    script = workdir / name / "script.yaml"
    script.write_text(yaml.safe_dump({"responses": session_script(repo, steps, seed)}, sort_keys=False))
    output = workdir / name / "out"
    database = output / f"{name}.checkpoint.sqlite"
    step_times: dict[int, float] = {}
    sizes: dict[int, tuple[int, int, int, int]] = {}

    def on_event(event: RunEvent) -> None:
        now = time.perf_counter()
        if event.kind == "step":
            step_times[event.step] = now
            if event.step in SIZE_MARKS:
                sizes[event.step] = (*db_sizes(database), (output / f"{name}.traj.json").stat().st_size)

    overrides = {"agent": {"step_limit": steps + 10, "cost_limit": 0}, "environment": {"tools": []}}
    config = load_config("default", **overrides)
    started = time.perf_counter()
    with profiler or contextlib.nullcontext():
        result = run_task(
            TASK,
            model=f"scripted:{script}",
            settings=config,
            output_dir=output,
            run_id=name,
            repo=repo,
            on_event=on_event,
        )
    seconds = time.perf_counter() - started
    traj = load_trajectory(result.trajectory_path)
    return Session(steps, traj, step_times, sizes, result.exit_status, seconds)


def model_seconds_per_step(calls: list[dict[str, Any]]) -> dict[int, float]:
    """Each call belongs to the operation whose `act` call it precedes (reflections included)."""
    per_step: dict[int, float] = {}
    acts = 0
    for call in calls:
        step = acts + 1
        per_step[step] = per_step.get(step, 0.0) + call["seconds"]
        acts += call["kind"] == "act"
    return per_step


def machinery_ms(session: Session) -> tuple[dict[int, float], dict[int, float]]:
    """Per step from 2 on: (wall − model − action duration, wall − model − command duration) in milliseconds."""
    model = model_seconds_per_step(session.traj["model_calls"])
    operations = session.traj["operations"]
    strict, in_process = {}, {}
    for step in range(2, len(operations) + 1):
        if step not in session.step_times or step - 1 not in session.step_times:
            continue
        wall = session.step_times[step] - session.step_times[step - 1]
        op = operations[step - 1]
        command = op["duration"] if op["action_type"] in ("bash", "search") else 0.0
        strict[step] = (wall - model.get(step, 0.0) - op["duration"]) * 1000
        in_process[step] = (wall - model.get(step, 0.0) - command) * 1000
    return strict, in_process


def last_act_prompts(calls: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, int]]:
    """Per operation: the prompt size of its (last) act call, and of all its calls (reflect + act + retries)."""
    act_chars: dict[int, int] = {}
    all_chars: dict[int, int] = {}
    acts = 0
    for call in calls:
        step = acts + 1
        all_chars[step] = all_chars.get(step, 0) + call["prompt_chars"]
        if call["kind"] == "act":
            act_chars[step] = call["prompt_chars"]
            acts += 1
    return act_chars, all_chars


def ours_act_prompt(traj: dict[str, Any], step: int) -> str:
    return [call for call in traj["model_calls"] if call["kind"] == "act"][step - 1]["prompt"]


def shape(thoughts: list[int], observations: list[int]) -> str:
    return (
        f"thought median {statistics.median(thoughts):.0f} chars (mean {statistics.mean(thoughts):.0f}), "
        f"observation median {statistics.median(observations):.0f} chars (mean {statistics.mean(observations):.0f})"
    )


def mini_observation_chars(observation: str, returncode: int | None) -> int:
    head = f"<returncode>{returncode}</returncode>\n"
    if len(observation) < MINI_TRUNCATE:
        return len(head) + len("<output>\n</output>") + len(observation)
    elided = f"<elided_chars>\n{len(observation) - MINI_TRUNCATE} characters elided\n</elided_chars>"
    tags = len("<output_head>\n</output_head>\n<output_tail>\n</output_tail>")
    return len(head) + MINI_WARNING_CHARS + tags + len(elided) + MINI_TRUNCATE


def full_history_chars(traj: dict[str, Any], templates: dict[str, Any]) -> dict[int, int]:
    """The prompt a full-history agent sends for operation k: system + task + (action, observation) of ops 1..k−1."""
    blank = dict.fromkeys(("actions", "reflect_format", "act_format", "task", "tool_usage"), "")
    fixed = len(render(templates, "system", **blank)) + len(render(templates, "task", task=traj["task"]))
    acts = [call["response"] for call in traj["model_calls"] if call["kind"] == "act"]
    sizes, total = {}, fixed
    for step, (op, response) in enumerate(zip(traj["operations"], acts, strict=False), start=1):
        sizes[step] = total
        total += len(response) + mini_observation_chars(op["observation"], op["returncode"])
    return sizes


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def real_anchor() -> tuple[list[tuple[str, int, int]], list[int], list[int]]:
    """Of the real mini-swe-agent trajectories: (instance, model calls, characters of all messages) each, and the
    lengths of all thoughts (assistant text before the command block) and of all observations."""
    rows, thoughts, observations = [], [], []
    for path in sorted(TRAJECTORIES.glob("*.traj.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data.get("messages") or []
        calls = sum(1 for m in messages if m.get("role") == "assistant")
        rows.append((data.get("instance_id") or path.name, calls, sum(len(text_of(m)) for m in messages)))
        thoughts += [len(text_of(m).split("```")[0]) for m in messages if m.get("role") == "assistant"]
        observations += [len(text_of(m)) for m in messages[2:] if m.get("role") == "user"]
    return rows, thoughts, observations


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


BREAKDOWN = [
    ("trajectory write (Recorder.write)", "llm_ide/run/trajectory.py", "write"),
    ("checkpoint put (whole state, per superstep)", "langgraph/checkpoint/sqlite/__init__.py", "put"),
    ("checkpoint put_writes", "langgraph/checkpoint/sqlite/__init__.py", "put_writes"),
    ("  of which msgpack serialisation", "langgraph/checkpoint/serde/jsonplus.py", "dumps_typed"),
    ("checkpoint prune", "llm_ide/run/checkpoint.py", "prune"),
    ("node render_context", "llm_ide/nodes/render_context.py", "render_context"),
    ("node reflect", "llm_ide/nodes/reflect.py", "reflect"),
    ("node branch", "llm_ide/nodes/branch.py", "branch"),
    ("node act", "llm_ide/nodes/act.py", "act"),
    ("node execute_tool (incl. commands)", "llm_ide/nodes/execute_tool.py", "execute_tool"),
    ("node update_activity", "llm_ide/nodes/update_activity.py", "update_activity"),
]


def profile_tables(stats: pstats.Stats, steps: int, limit: int = 15) -> list[Table]:
    entries: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    breakdown = Table(title=f"cProfile (all threads) of a {steps}-step session: per-step cost of the agent's parts")
    for column in ("part", "calls", "ms per step (profiled)"):
        breakdown.add_column(column, justify="left" if column == "part" else "right")
    for label, suffix, function in BREAKDOWN:
        found = [v for (f, _, name), v in entries.items() if name == function and f.endswith(suffix)]
        if found:
            calls, cumulative = sum(v[1] for v in found), sum(v[3] for v in found)
            breakdown.add_row(label, str(calls), f"{cumulative / steps * 1000:.1f}")
    top = Table(title="top own-time functions (waits on locks and queues are other threads' work)")
    for column in ("function", "calls", "own s", "cumulative s"):
        top.add_column(column, justify="left" if column == "function" else "right")
    rows = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)
    for (filename, line, function), (_, calls, own, cumulative, _) in rows[:limit]:
        where = "/".join(Path(filename).parts[-2:])
        top.add_row(f"{function} ({where}:{line})", str(calls), f"{own:.2f}", f"{cumulative:.2f}")
    return [breakdown, top]


def prompt_sections(prompt: str) -> dict[str, int]:
    """Characters per `## ` section of a prompt (the workspace template's headings), the rest as `other`."""
    sections: dict[str, int] = {}
    for index, part in enumerate(prompt.split("\n## ")):
        title = "other" if index == 0 else part.split("\n", 1)[0].strip()
        sections[title] = sections.get(title, 0) + len(part)
    return sections


def main(
    seed: Annotated[int, typer.Option(help="Seed of the generated session.")] = 7,
    profile: Annotated[bool, typer.Option(help="Profile a 100-step session even when the machinery is fast.")] = False,
    keep: Annotated[
        Path | None, typer.Option(help="Keep the sessions (repositories, trajectories, databases).")
    ] = None,
) -> None:
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="bench-session-")) if keep is None else keep
    workdir.mkdir(parents=True, exist_ok=True)
    templates = load_config("default").templates
    try:
        sessions = {steps: run_session(workdir, steps, seed) for steps in (100, 200)}
        for session in sessions.values():
            ops = session.traj["operations"]
            bad = sum(1 for op in ops if op["bad_action"])
            console.print(
                f"{session.steps}-step session: {session.exit_status}, {len(ops)} operations ({bad} reflected bad), "
                f"{len(session.traj['model_calls'])} model calls, {len(session.traj['code_context'])} chunks, "
                f"{session.seconds:.1f} s"
            )
            if session.exit_status != "submitted" or len(ops) != session.steps:
                raise typer.Exit(f"the {session.steps}-step session did not play out: {session.exit_status}")

        # (a) prompt size
        hundred = sessions[100].traj
        ours_act, ours_all = last_act_prompts(hundred["model_calls"])
        full = full_history_chars(hundred, templates)
        table = Table(
            title="(a) prompt size per step (characters): ours vs a full-history (mini-swe-agent-style) agent"
        )
        for column in ("step", "ours: act", "ours: reflect+act", "full history", "act / full", "(reflect+act) / full"):
            table.add_column(column, justify="right")
        for step in PROMPT_MARKS:
            table.add_row(
                str(step),
                f"{ours_act[step]:,}",
                f"{ours_all[step]:,}",
                f"{full[step]:,}",
                f"{ours_act[step] / full[step]:.3f}",
                f"{ours_all[step] / full[step]:.3f}",
            )
        console.print(table)
        observations = [len(op["observation"]) for op in hundred["operations"]]
        thoughts = [len(op["thought"]) for op in hundred["operations"]]
        sections = ", ".join(f"{k} {v:,}" for k, v in prompt_sections(ours_act_prompt(hundred, 100)).items())
        console.print(f"our act prompt at step 100 by section (chars): {sections}")
        console.print(f"session shape: {shape(thoughts, observations)}")
        anchor, real_thoughts, real_observations = real_anchor()
        if anchor:
            console.print(f"real mini-swe-agent shape: {shape(real_thoughts, real_observations)}")
            table = Table(title=f"anchor: real mini-swe-agent trajectories ({TRAJECTORIES})")
            for column in ("instance", "model calls", "context at last step (chars)"):
                table.add_column(column, justify="left" if column == "instance" else "right")
            for instance, calls, chars in anchor:
                table.add_row(instance, str(calls), f"{chars:,}")
            median_chars = statistics.median(chars for _, _, chars in anchor)
            table.add_row("median", f"{statistics.median(c for _, c, _ in anchor):.0f}", f"{median_chars:,.0f}")
            console.print(table)
        elif os.environ.get("CI"):
            raise SystemExit(f"CI is set but {TRAJECTORIES} holds no trajectories (../shared must be beside the clone)")
        else:
            median_chars = 0
            console.print(f"anchor: {TRAJECTORIES} is absent; no real-trajectory figure")

        # (b) machinery
        strict: list[float] = []
        in_process: list[float] = []
        window_strict: list[float] = []
        window_in_process: list[float] = []
        for session in sessions.values():
            s, p = machinery_ms(session)
            strict += s.values()
            in_process += p.values()
            window_strict += [s[step] for step in WINDOW if step in s]
            window_in_process += [p[step] for step in WINDOW if step in p]
        table = Table(title="(b) agent machinery per step (ms): wall − model call − action execution")
        for column in ("steps", "samples", "median", "p95", "median, in-process actions", "p95, in-process actions"):
            table.add_column(column, justify="right")
        for label, values, extra in (
            (f"{WINDOW.start}–{WINDOW.stop - 1}", window_strict, window_in_process),
            ("all", strict, in_process),
        ):
            table.add_row(
                label,
                str(len(values)),
                f"{statistics.median(values):.1f}",
                f"{percentile(values, 0.95):.1f}",
                f"{statistics.median(extra):.1f}",
                f"{percentile(extra, 0.95):.1f}",
            )
        console.print(table)
        p50 = statistics.median(window_strict)

        # (c) checkpoint size
        long = sessions[200]
        table = Table(title="(c) checkpoint database (sqlite, bytes) of the 200-step session, and the trajectory")
        for column in ("step", "db file", "WAL", "db + WAL", "latest checkpoint", "trajectory JSON"):
            table.add_column(column, justify="right")
        for step in SIZE_MARKS:
            db, wal, blob, traj = long.sizes[step]
            table.add_row(str(step), f"{db:,}", f"{wal:,}", f"{db + wal:,}", f"{blob:,}", f"{traj:,}")
        console.print(table)
        growth = sum(long.sizes[200][:2]) / sum(long.sizes[100][:2])

        if p50 > 10 or profile:
            profiler = ThreadProfiler()
            run_session(workdir, 100, seed, profiler)
            for table in profile_tables(profiler.stats(), 100):
                console.print(table)

        anchor_note = f" anchor_mini_context_median={median_chars:.0f}" if anchor else ""
        print(
            f"RESULT prompt_ratio_100={ours_act[100] / full[100]:.3f} "
            f"prompt_ratio_100_reflect_act={ours_all[100] / full[100]:.3f} machinery_ms_p50={p50:.1f} "
            f"machinery_ms_p95={percentile(window_strict, 0.95):.1f} checkpoint_growth_200_100={growth:.2f}"
            f"{anchor_note}"
        )
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    typer.run(main)
