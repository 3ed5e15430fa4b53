#!/usr/bin/env python
"""Machinery CPU per step: llm-ide against mini-swe-agent on the same scripted session, through one endpoint.

Both agents play the session of bench_cost.py (the same generated steps over a git repository of large standard-library
copies, the same loopback OpenAI-compatible endpoint, mini-swe-agent from its own venv with its default config), one
after the other, `--rounds` times in turn (llm-ide, mini, llm-ide, mini, ...). When a request arrives the endpoint
reads the CPU time (user + system) the agent's own process has used so far (its process CPU clock, to the nanosecond:
all its threads, those that have ended too, not the commands it runs, which are its children). An agent's CPU per step
at step N is its CPU from the first request of step N-9 to the first request of step N+1, over 10: what the agent does
between two model replies (its prompt, the call, parsing, in-process actions such as views and edits, checkpoints,
trajectory) without the commands' own CPU. The median of the rounds is shown; the ratio llm-ide / mini compares them
side by side in one run, and `paired` is the median of each round's own ratio (a round's two runs follow each other: the
machine's drift between rounds, often larger than the gap, cancels out). The row `all` is the whole session's CPU per
step (from its first request to its last). After the table, the graph alone: llm-ide's six nodes doing nothing but
routing, checkpointed and streamed as a run is (`graph_ms`), the part of llm-ide's figure that is LangGraph's before any
node works.

`--against REV` (a revision of this repository, or a checkout's folder) plays that llm-ide too in each round, right
after this one, with its own package (PYTHONPATH, compiled as pip compiles ours): the line after the table gives the
median of each round's new / old ratio at each mark, and RESULT its `new_old_*` keys (a change measured side by side
in one run, the machine's drift between rounds cancelled as for `paired`).
"""

from __future__ import annotations

import compileall
import os
import resource
import statistics
import subprocess
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from bench_cost import (
    HERE,
    MINI,
    Agent,
    Endpoint,
    llm_ide_command,
    replies_of,
)
from bench_cost_session import mini_responses, verdict_words, with_check_script
from bench_mini import mini_python
from bench_old_new import checkout
from bench_session_script import TASK, make_repo, session_script
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from rich.console import Console
from rich.table import Table
from typing_extensions import TypedDict

from llm_ide.config import load_config
from llm_ide.graph import CORE, ENDING
from llm_ide.run.checkpoint import open_checkpointer

MARKS = (10, 50, 100)
WINDOW = 10
CPUCLOCK_SCHED = 2  # Linux's CPU clock of another process: ((~pid) << 3) | 2, what clock_getcpuclockid(3) returns
OURS = "llm-ide@gpt"
OLD = "llm-ide-old@gpt"  # --against: the other revision


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system, all threads, no children) the process `pid` has used, to the nanosecond
    (/proc/PID/stat counts in 10 ms ticks: ±1 ms a step over a 10-step window)."""
    return time.clock_gettime((~pid << 3) | CPUCLOCK_SCHED)


class CpuEndpoint(Endpoint):
    """bench_cost's endpoint, also noting the asking agent's CPU (by step) as each request arrives."""

    def __init__(self, agents: dict[str, Agent], wire: Path) -> None:
        super().__init__(agents, wire)
        self.pid: int | None = None
        self.cpu: dict[str, dict[int, float]] = {name: {} for name in agents}

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        agent = self.agents.get(body.get("model", ""))
        if agent is not None and self.pid is not None and len(agent.calls) < len(agent.replies):
            step = agent.replies[len(agent.calls)][0]
            self.cpu[agent.name].setdefault(step, process_cpu(self.pid))
        return super().answer(body)


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def play(
    endpoint: CpuEndpoint, agent: Agent, command: list[str], log: Path, env: dict[str, str] | None = None
) -> tuple[dict[int, float], float]:
    """One run of `agent` (its calls and CPU marks reset): the CPU at the first request of each step, and the whole
    run's (start-up, the commands and everything else it started included)."""
    agent.calls, agent.previous, endpoint.cpu[agent.name] = [], [], {}
    before = children_cpu()
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        endpoint.pid = process.pid
        process.wait()
    endpoint.pid = None
    whole = children_cpu() - before
    if process.returncode != 0 or len(agent.calls) != len(agent.replies):
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"{agent.name} did not play the session out ({len(agent.calls)} calls):\n{tail}")
    return endpoint.cpu[agent.name], whole


def per_step_ms(cpu: dict[int, float], mark: int) -> float:
    """Milliseconds of CPU per step over the WINDOW steps ending at `mark` (or the whole session for 0: its first
    request's step to its last's)."""
    first, last = (min(cpu), max(cpu)) if mark == 0 else (mark + 1 - WINDOW, mark + 1)
    return (cpu[last] - cpu[first]) / (last - first) * 1000


class FloorState(TypedDict, total=False):
    n_operations: int
    node: str


def graph_floor(steps: int) -> float:
    """Milliseconds of CPU per step of the graph alone: the six nodes, named as llm-ide's, doing nothing but routing,
    checkpointed by the saver a run uses, streamed as a run streams them. What LangGraph's six super-steps and their
    checkpoints cost a step before any node does its work (mini-swe-agent has no such part)."""

    def node(name: str, following: str) -> Any:
        def run(state: FloorState) -> Command[str]:
            done = state.get("n_operations", 0) + (name == ENDING)
            return Command(update={"node": name, "n_operations": done}, goto=END if done >= steps else following)

        return run

    names = list(CORE)
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(FloorState)
    for name, following in zip(names, [*names[1:], names[0]], strict=True):
        builder.add_node(name, node(name, following), destinations=(following, END))
    builder.add_edge(START, names[0])
    with (
        tempfile.TemporaryDirectory(prefix="bench-floor-") as folder,
        open_checkpointer(None, Path(folder) / "floor.sqlite") as saver,
    ):
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "floor"}, "recursion_limit": 10 * steps}
        start = time.process_time()
        for _ in graph.stream({}, config, stream_mode="values", durability="sync"):
            pass
        return (time.process_time() - start) / steps * 1000


def paired(first: list[dict[int, float]], second: list[dict[int, float]], mark: int) -> float:
    """The median of each round's own ratio first / second at `mark` (a round's runs follow each other)."""
    return statistics.median(per_step_ms(a, mark) / per_step_ms(b, mark) for a, b in zip(first, second, strict=True))


def against_line(
    console: Console, against: str, new: list[dict[int, float]], old: list[dict[int, float]], marks: tuple[int, ...]
) -> list[str]:
    """This llm-ide against `--against`'s: each round's own new / old ratio at each mark, their median."""
    ratios = {mark: paired(new, old, mark) for mark in (*marks, 0)}
    said = ", ".join(f"{mark or 'all'} {ratio:.2f}" for mark, ratio in ratios.items())
    console.print(f"llm-ide against {against} (new / old, the median of each round's ratio): {said}")
    return [f"new_old_{mark or 'all'}={ratio:.2f}" for mark, ratio in ratios.items()]


def command_of(agent: Agent, repo: Path, task: Path, url: str, steps: int, mini: Path, single_call: bool) -> list[str]:
    """The command that runs `agent` on the session (mini-swe-agent with the interpreter of its own venv)."""
    if agent.name != MINI:
        return llm_ide_command(agent, repo, task, url, steps, agent.folder.parent, single_call)
    output = agent.folder / "mini.traj.json"
    return [str(mini), str(HERE / "bench_cost_mini.py"), str(task), str(repo), str(output), agent.model, url]


def main(
    rounds: Annotated[int, typer.Option(help="Runs of each agent, in turn; the median is shown.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the generated session.")] = 7,
    quick: Annotated[bool, typer.Option(help="One round of a 25-step session (figures at 10, 20).")] = False,
    against: Annotated[str | None, typer.Option(help="A revision or checkout of llm-ide played too.")] = None,
) -> None:
    console = Console()
    marks, rounds = ((10, 20), 1) if quick else (MARKS, rounds)
    steps = max(marks) + 5
    single_call = load_config("default").agent.single_call
    python = mini_python(console)
    with (
        checkout(against, HERE.parent) if against else nullcontext(None) as old_root,
        tempfile.TemporaryDirectory(prefix="bench-step-cpu-") as temporary,
    ):
        workdir = Path(temporary)
        task = workdir / "task.md"
        task.write_text(TASK)
        template = make_repo(workdir / "template")
        script = with_check_script(session_script(template, steps, seed))
        matches = load_config("default").agent.search_max_results
        said = ["", *map(verdict_words, script[1::2])] if single_call else None
        agents = {OURS: Agent(OURS, replies_of(script, single_call), workdir / "ours")}
        if old_root is not None:
            compileall.compile_dir(old_root / "llm_ide", quiet=1)
            agents[OLD] = Agent(OLD, replies_of(script, single_call), workdir / "old")
        agents[MINI] = Agent(MINI, list(enumerate(mini_responses(template, script[0::2], matches, said), 1)), workdir)
        endpoint = CpuEndpoint(agents, workdir / "wire.jsonl")
        os.environ.update(MSWEA_SILENT_STARTUP="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
        samples: dict[str, list[dict[int, float]]] = {name: [] for name in agents}
        whole: dict[str, list[float]] = {name: [] for name in agents}
        with endpoint.loopback:
            for number in range(rounds):
                for name, agent in agents.items():
                    run = workdir / f"{name}-{number}"
                    repo = make_repo(run / "repo")
                    agent.folder = run / "out"
                    agent.folder.mkdir(parents=True)
                    command = command_of(agent, repo, task, endpoint.loopback.url, steps, python, single_call)
                    env = {**os.environ, "PYTHONPATH": str(old_root)} if name == OLD else None
                    marks_cpu, seconds = play(endpoint, agent, command, run / "console.log", env)
                    samples[name].append(marks_cpu)
                    whole[name].append(seconds)
        endpoint.wire.close()
    title = f"machinery CPU per step (ms; median of {rounds} round(s), {WINDOW} steps up to the mark; all: the session)"
    table = Table(title=title)
    for column in ("step", "llm-ide", "mini-swe-agent", "llm-ide / mini", "paired"):
        table.add_column(column, justify="right")
    pairs = []
    for mark in (*marks, 0):
        ours, mini = (statistics.median(per_step_ms(cpu, mark) for cpu in samples[name]) for name in (OURS, MINI))
        each = paired(samples[OURS], samples[MINI], mark)
        name = mark or "all"
        table.add_row(str(name), f"{ours:.2f}", f"{mini:.2f}", f"{ours / mini:.2f}", f"{each:.2f}")
        pairs += [f"ours_ms_{name}={ours:.2f}", f"mini_ms_{name}={mini:.2f}", f"ratio_{name}={ours / mini:.2f}"]
        pairs.append(f"paired_{name}={each:.2f}")
    console.print(table)
    if against:
        pairs += against_line(console, against, samples[OURS], samples[OLD], marks)
    floor = statistics.median(graph_floor(steps) for _ in range(rounds))  # after the runs: the endpoint's thread gone
    console.print(f"the graph alone (six nodes doing nothing, the same checkpoints): {floor:.1f} ms a step")
    ours_run, mini_run = (statistics.median(whole[name]) for name in (OURS, MINI))
    console.print(f"a whole run, start-up and commands included: llm-ide {ours_run:.2f} s of CPU, mini {mini_run:.2f}")
    pairs += [f"ours_run_s={ours_run:.2f}", f"mini_run_s={mini_run:.2f}"]
    console.print(f"RESULT steps={steps} rounds={rounds} {' '.join(pairs)} graph_ms={floor:.1f}", soft_wrap=True)


if __name__ == "__main__":
    typer.run(main)
