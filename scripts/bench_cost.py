#!/usr/bin/env python
"""What a run costs: llm-ide against mini-swe-agent 2.4.6 on the same scripted session, through one logged endpoint.

Both agents play the session of `bench_session.py` (≥100 steps on a git repository of large standard-library copies:
line-range views, definition views, greps, `sed -n`, edits of which some are reverted, a check script written then
run, compile checks, submit), one after the other, each in its own process, against one loopback OpenAI-compatible
endpoint that records every request on the wire (`wire.jsonl`) and answers with the scripted responses of the agent
that asks (by model name); a step is an operation of llm-ide (its reflect and act calls) and a call of mini.
mini-swe-agent runs from its own venv (installed once with uv under the user cache) with its default text-based config;
its responses carry the same thoughts and a bash command doing what llm-ide's action does (`nl -ba | sed -n` for
views, grep for searches, `sed -i` for annotations, a python edit for reverts, a heredoc for the check script,
`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` to submit).

llm-ide plays the session once per price profile (`--profile`, by default gpt, claude55 and open of
llm_ide.pricing.PROFILES: its model's price entry, which its renewals weigh), mini-swe-agent once (its prompts do not
depend on prices); each llm-ide run is billed, and mini's run with it, at that profile's prices.

Figures up to a step (calls of steps 1..N, cumulative), from the wire:
- raw prompt characters: the characters of all messages of every request;
- bill (in characters): uncached input × the profile's uncached price (its cache write where it has one), the prefix a
  request shares with the same run's previous request × its cached price, output × its output price; the endpoint
  also reports that prefix as `prompt_tokens_details.cached_tokens` (chars / 4);
- output: the characters of all responses; calls;
- bytes written: write syscalls into the run's output folder (strace), bytes on disk: the folder's size.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from bench_cost_session import ANNOTATION, mini_responses, verdict_words, with_check_script
from bench_disk import folder_bytes, strace_prefix, writes_into
from bench_mini import mini_python
from bench_session_script import TASK, make_repo, session_script
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.pricing import PROFILES, Price, settings_of
from llm_ide.replay.endpoint import LoopbackEndpoint, completion, error, prompt_chars, shared_prefix

MARKS = (10, 30, 50, 100)
MINI = "mini"
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- the endpoint


@dataclass
class Call:
    step: int
    arrived: float
    raw: int
    cached: int
    output: int
    folder: int  # bytes in the agent's output folder when the request arrived


@dataclass
class Agent:
    name: str  # mini, or llm-ide@<profile>
    replies: list[tuple[int, str]]  # (step, text) in call order
    folder: Path
    calls: list[Call] = field(default_factory=list)
    previous: list[dict[str, Any]] = field(default_factory=list)

    @property
    def model(self) -> str:
        """The model name it asks the endpoint for."""
        return "bench-" + self.name.replace("@", "-")


class Endpoint:
    """One loopback OpenAI-compatible endpoint for both agents (llm_ide.replay.endpoint); every request goes to `wire`
    (JSON lines)."""

    def __init__(self, agents: dict[str, Agent], wire: Path) -> None:
        self.agents = {agent.model: agent for agent in agents.values()}
        self.wire = wire.open("a", encoding="utf-8")
        self.lock = threading.Lock()
        self.loopback = LoopbackEndpoint(self.answer, list(self.agents))

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        agent = self.agents.get(body.get("model", ""))
        if agent is None:
            return error(404, f"no model {body.get('model')!r}")
        messages = body.get("messages") or []
        with self.lock:
            index = len(agent.calls)
            if index >= len(agent.replies):
                return error(400, f"{agent.name}: the script has only {index} responses")
            step, text = agent.replies[index]
            raw = prompt_chars(messages)
            cached = shared_prefix(agent.previous, messages)
            agent.previous = messages
            agent.calls.append(Call(step, time.time(), raw, cached, len(text), folder_bytes(agent.folder)))
            record = {"agent": agent.name, "index": index, "step": step, "raw": raw, "cached": cached, "request": body}
            self.wire.write(json.dumps({**record, "response": text}) + "\n")
        return 200, completion(str(body.get("model")), text, index, raw, cached)


# ---------------------------------------------------------------- running and measuring


def run_agent(agent: Agent, command: list[str], workdir: Path, console: Console) -> list[tuple[float, int, str]] | None:
    log = workdir / f"{agent.name}.strace"
    traced = strace_prefix(log)
    started = time.perf_counter()
    with (workdir / f"{agent.name}.console.log").open("w") as out:
        done = subprocess.run([*traced, *command], stdout=out, stderr=subprocess.STDOUT, check=False)
    console.print(
        f"{agent.name}: {len(agent.calls)} calls in {time.perf_counter() - started:.0f} s (exit {done.returncode})"
    )
    if done.returncode != 0 or len(agent.calls) != len(agent.replies):
        tail = (workdir / f"{agent.name}.console.log").read_text(errors="replace")[-2000:]
        raise SystemExit(f"{agent.name} did not play the session out ({len(agent.calls)} calls):\n{tail}")
    return writes_into(log, agent.folder) if traced else None


@dataclass
class Figures:
    raw: int
    bill: float
    output: int
    calls: int
    written: int | None
    on_disk: int


def figures(agent: Agent, writes: list[tuple[float, int, str]] | None, step: int, price: Price) -> Figures:
    calls = [call for call in agent.calls if call.step <= step]
    later = [call for call in agent.calls if call.step > step]
    until = later[0].arrived if later else float("inf")
    on_disk = later[0].folder if later else folder_bytes(agent.folder)
    bill = sum(price.bill(c.raw - c.cached, c.cached, c.output) for c in calls)
    written = None if writes is None else sum(size for when, size, _ in writes if when < until)
    return Figures(sum(c.raw for c in calls), bill, sum(c.output for c in calls), len(calls), written, on_disk)


def ratio(a: float | None, b: float | None) -> float:
    return a / b if a is not None and b else float("nan")


def shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


ROWS = [("raw chars", "raw"), ("bill", "bill"), ("output chars", "output"), ("calls", "calls"),
        ("bytes written", "written"), ("bytes on disk", "on_disk")]  # fmt: skip


def report(
    agents: dict[str, Agent],
    writes: dict[str, Any],
    steps: int,
    console: Console,
    marks: tuple[int, ...] = MARKS,
    profile: str = "gpt",
) -> dict[int, dict]:
    """The table of llm-ide under `profile` against mini at each mark; the ratios llm-ide / mini by mark and figure."""
    price, ours_name = PROFILES[profile], f"llm-ide@{profile}"
    title = (
        f"{steps}-step session under {profile}, in characters; bill = uncached × {price.write:g} + cached prefix × "
        f"{price.read:g} + output × {price.output:g}"
    )
    table = Table(title=title)
    for column in ("up to step", "figure", "llm-ide", "mini-swe-agent", "llm-ide / mini"):
        table.add_column(column, justify="right")
    result: dict[int, dict[str, float]] = {}
    for step in marks:
        ours, mini = (figures(agents[name], writes[name], step, price) for name in (ours_name, MINI))
        result[step] = {}
        for label, key in ROWS:
            a, b = getattr(ours, key), getattr(mini, key)
            result[step][key] = ratio(a, b)
            table.add_row(str(step) if key == "raw" else "", label, shown(a), shown(b), f"{ratio(a, b):.2f}")
        table.add_section()
    console.print(table)
    return result


def writers(agents: dict[str, Agent], writes: dict[str, Any], console: Console) -> None:
    """Each agent's share of prompt characters that repeat a prefix, and the files it wrote most to."""
    for name, agent in agents.items():
        raw, cached = sum(c.raw for c in agent.calls), sum(c.cached for c in agent.calls)
        console.print(f"{name}: {cached / raw:.0%} of all prompt characters repeat a prefix of the previous request")
        by_file: dict[str, int] = {}
        for _, size, file in writes[name] or []:
            by_file[file] = by_file.get(file, 0) + size
        ranked = sorted(by_file.items(), key=lambda item: -item[1])
        console.print(f"{name} wrote: " + ", ".join(f"{file} {size / 1e6:.1f} MB" for file, size in ranked[:5]))


def llm_ide_command(
    agent: Agent, repo: Path, task: Path, url: str, steps: int, workdir: Path, single_call: bool = False
) -> list[str]:
    """`llm-ide run` on the session, its model priced with the agent's profile, its replies asked whole: the loopback
    endpoint sends no streams (a streamed request it answered whole would be asked again: a call more on the wire)."""
    overrides = workdir / f"{agent.model}.yaml"
    settings = {
        "agent": {"cost_limit": 0, "single_call": single_call},
        "environment": {"type": "local", "tools": []},
        "model": {"prices": {agent.model: settings_of(PROFILES[agent.name.split("@")[1]])}, "stream": False},
    }
    overrides.write_text(yaml.safe_dump(settings))
    return [str(Path(sys.executable).with_name("llm-ide")), "run", "--repo", str(repo), "--task-file", str(task),
            "--model", agent.model, "--base-url", url, "--config", str(overrides), "--output", str(agent.folder),
            "--step-limit", str(steps + 10), "--thread-id", "bench"]  # fmt: skip


def own_accounting(agent: Agent, console: Console) -> None:
    """llm-ide's model_stats (its price table holds the profile's prices per token) against the endpoint's figures."""
    stats = json.loads((agent.folder / "bench.traj.json").read_text())["info"]["model_stats"]
    price = PROFILES[agent.name.split("@")[1]]
    tokens = [(c.raw // 4, c.cached // 4, c.output // 4) for c in agent.calls]
    wire = sum(price.cost(raw, out, cached) for raw, cached, out in tokens) / 1e6
    console.print(
        f"{agent.name}'s own model_stats: cost {stats.get('cost', 0):.4f}, cache_read_tokens "
        f"{stats.get('cache_read_tokens', 'absent')} (the endpoint's usage: cost {wire:.4f}, "
        f"cached {sum(cached for _, cached, _ in tokens)})"
    )


def same_tree(repos: dict[str, Path], console: Console) -> bool:
    diffs = {
        name: subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True).stdout
        for name, repo in repos.items()
    }
    same = len(set(diffs.values())) == 1
    count = diffs[MINI].count(ANNOTATION)
    console.print(f"same working tree at the end: {'yes' if same else 'NO'} ({count} annotations)")
    return same


def marks_of(steps: int, quick: bool) -> tuple[int, ...]:
    """The steps the figures are given at: the usual ones the session reaches, and its last."""
    return (10, 30) if quick else tuple(dict.fromkeys([*(mark for mark in MARKS if mark < steps), steps]))


def replies_of(script: list[str], single_call: bool) -> list[tuple[int, str]]:
    """llm-ide's replies (step, text): a reflection and an action per step, or each reflection joined to the next
    action in one reply."""
    if single_call:
        return [(1, script[0])] + [(i // 2 + 2, f"{script[i]}\n{script[i + 1]}") for i in range(1, len(script), 2)]
    return [((i + 1) // 2 + 1, text) for i, text in enumerate(script)]


def main(
    steps: Annotated[int, typer.Option(help="Steps of the session.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the generated session.")] = 7,
    keep: Annotated[Path | None, typer.Option(help="Keep the repositories, outputs and wire log here.")] = None,
    single_call: Annotated[
        bool | None,
        typer.Option(
            "--single-call/--two-calls",
            help="llm-ide with one call per step (reflection + action) or two.",
            show_default="the bundled agent.single_call",
        ),
    ] = None,
    profile: Annotated[
        list[str] | None,
        typer.Option(help=f"Price profiles (repeat): {', '.join(PROFILES)}.", show_default="all of them"),
    ] = None,
    quick: Annotated[
        bool, typer.Option(help="A 30-step session (figures at 10, 30): what the test suite runs.")
    ] = False,
) -> None:
    console = Console()
    single_call = load_config("default").agent.single_call if single_call is None else single_call
    steps, marks = (30 if quick else steps), marks_of(steps, quick)
    profiles = profile or list(PROFILES)
    if unknown := set(profiles) - set(PROFILES):
        raise typer.BadParameter(f"--profile: {', '.join(PROFILES)}, not {', '.join(sorted(unknown))}")
    python = mini_python(console)
    workdir = Path(tempfile.mkdtemp(prefix="bench-cost-")) if keep is None else keep.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        names = [MINI, *(f"llm-ide@{name}" for name in profiles)]
        repos = {name: make_repo(workdir / name / "repo") for name in names}
        script = with_check_script(session_script(repos[MINI], steps, seed))
        mine = replies_of(script, single_call)
        agents = {name: Agent(name, mine if name != MINI else [], workdir / name / "out") for name in names}
        matches = load_config("default").agent.search_max_results
        said = ["", *map(verdict_words, script[1::2])] if single_call else None  # in one reply, both say it
        agents[MINI].replies = list(enumerate(mini_responses(repos[MINI], script[0::2], matches, said), start=1))
        task = workdir / "task.md"
        task.write_text(TASK)
        endpoint = Endpoint(agents, workdir / "wire.jsonl")
        endpoint.loopback.__enter__()
        url = endpoint.loopback.url
        commands = {
            name: llm_ide_command(agents[name], repos[name], task, url, steps, workdir, single_call)
            for name in names[1:]
        }
        commands[MINI] = [str(python), str(HERE / "bench_cost_mini.py"), str(task), str(repos[MINI]),
                          str(agents[MINI].folder / "mini.traj.json"), agents[MINI].model, url]  # fmt: skip
        os.environ.update(MSWEA_SILENT_STARTUP="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
        writes = {}
        for name in names:
            agents[name].folder.mkdir(parents=True, exist_ok=True)
            writes[name] = run_agent(agents[name], commands[name], workdir, console)
        endpoint.loopback.__exit__()
        endpoint.wire.close()
        same = same_tree(repos, console)
        for name in names[1:]:
            own_accounting(agents[name], console)
        if writes[MINI] is None:
            console.print("strace is missing: bytes written are not measured")
        writers(agents, writes, console)
        pairs = []
        for name in profiles:
            result, last = report(agents, writes, steps, console, marks, name), max(marks)
            keys = [
                *(f"bill_ratio_{mark}" for mark in marks),
                *(f"raw_ratio_{mark}" for mark in dict.fromkeys((30, last)) if mark in result),
            ]
            values = {f"bill_ratio_{mark}": result[mark]["bill"] for mark in marks} | {
                f"raw_ratio_{mark}": result[mark]["raw"] for mark in marks
            }
            pairs += [f"{name}_{key}={values[key]:.2f}" for key in keys]
            pairs += [
                f"{name}_output_ratio={result[last]['output']:.2f}",
                f"{name}_disk_ratio={result[last]['written']:.2f}",
            ]
            pairs += [f"{name}_folder_ratio={result[last]['on_disk']:.2f}"]
        if keep:
            console.print(f"wire log: {workdir / 'wire.jsonl'}")
        kb = folder_bytes(agents[names[1]].folder) / 1024
        print(f"RESULT {' '.join(pairs)} folder_kb={kb:.0f} same_tree={str(same).lower()}")
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    typer.run(main)
