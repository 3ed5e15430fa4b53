"""The scripted 100+-step session the benchmarks share: a git repo of large stdlib copies and the responses of a
model that views, greps, annotates, checks and submits (bench_session.py, bench_cost.py)."""

from __future__ import annotations

import ast
import io
import json
import random
import shutil
import subprocess
import sysconfig
import tokenize
from collections import deque
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

STDLIB = Path(sysconfig.get_paths()["stdlib"])
WANTED = ["typing.py", "argparse.py", "email/_header_value_parser.py", "tkinter/__init__.py", "_pydecimal.py"]
SPARE = ["pydoc.py", "inspect.py"]  # when a distribution leaves a module out (Debian's tkinter is python3-tk)
FILES = [name for name in [*WANTED, *SPARE] if (STDLIB / name).is_file()][: len(WANTED)]
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


@cache
def analysed(name: str, text: str) -> tuple[frozenset[int], tuple[Symbol, ...]]:
    """A file's one-line statements and its symbols of 4 to 120 lines: each session of a process reads the same files
    (tokenizing them is most of a session's making)."""
    symbols = tuple(s for s in symbols_of(name, text) if 4 <= s.end - s.start + 1 <= 120)
    return frozenset(one_line_statements(text)), symbols


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
    safe: dict[str, frozenset[int]] = field(default_factory=dict)
    symbols: list[Symbol] = field(default_factory=list)
    seen: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=40))
    focus: Symbol | None = None
    focus_left: int = 0
    edited: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for name in FILES:
            text = (self.repo / name).read_text(encoding="utf-8")
            self.texts[name] = text.split("\n")
            safe, symbols = analysed(name, text)
            self.safe[name] = safe
            self.symbols += symbols

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
