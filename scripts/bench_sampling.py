#!/usr/bin/env python
"""What action sampling costs: the same scripted session (bench_session_script, N steps) with k=1 and with k=3.

Each k=3 step gets three candidate replies: the session's own action, the same action with another thought (folded
into the first candidate) and a different action (`git status`); the chooser always picks candidate 1, so every run
makes the same operations and only the sampling differs. Configurations, side by side in one run:
- k=1: no sampling (one act call per step);
- k=3 ask_colleagues: three act calls and one discriminator call per step (none when the candidates are identical);
- k=3 pairwise: three act calls and one comparison per step (two distinct candidates);
- k=3 n: the three candidates in one request with the provider's `n` (a loopback OpenAI-compatible endpoint,
  tests/openai_server.py), then the discriminator call.
Then the wall time at a remote endpoint's latency (`--latency` seconds per request, loopback endpoint), k=1 against
k=3 without `n` (three identical samples: no choosing call, so each step waits for two rounds in both): the k
requests are in flight together, so k=3 costs about the time of k=1, not k times the act call's.
Two calls per step (the script holds each reflection apart). Bill (GPT-5-mini-style, in characters, as in
bench_cost.py): uncached prompt ×1, the prefix a request shares with the run's previous request ×0.1, output ×8, from
each call's prompt and response in the calls log (bench_bill.py); the memory is given these prices (the scripted
model has none), which its renewals weigh. The RESULT holds the bills themselves beside their ratios to k=1.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from bench_bill import GPT, bill_of, memory_priced
from bench_session_script import TASK, act, make_repo, session_script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from openai_server import OpenAIServer, Reply  # noqa: E402

from llm_ide.config import Settings, load_config  # noqa: E402
from llm_ide.run.single import run_task  # noqa: E402
from llm_ide.run.trajectory import load_trajectory  # noqa: E402

PORTABLE = True  # bench_old_new runs this script on the old package too (bench_bill.py)
PRICE = GPT  # the bill's prices, and those the scripted runs' renewals weigh (memory.unpriced)
OTHER = act("Another way: list the changed files before going on.", "bash", command="git status --short")
PICK = "Candidate 1 follows the plan and is grounded in the code read so far.\n<choice>1</choice>"


@dataclass
class Measured:
    name: str
    calls: int
    steps: int
    prompt_chars: int
    bill: float
    output_chars: int
    seconds: float
    kinds: dict[str, int]


def is_action(response: str) -> bool:
    return not response.startswith(("good:", "bad:"))


def is_submit(response: str) -> bool:
    return response.rstrip().endswith("<submit></submit>")


def rethought(response: str) -> str:
    """The same action with another thought: folded into the first candidate."""
    return f"On reflection, {response}"


def sampled_script(responses: list[str], choice: str) -> list[str]:
    """Each action becomes three candidates (and a chooser reply when two of them differ)."""
    out: list[str] = []
    for response in responses:
        if not is_action(response):
            out.append(response)
        elif is_submit(response):
            out += [response] * 3  # identical: no choosing call
        else:
            out += [response, rethought(response), OTHER, PICK]
    return out


def n_replies(responses: list[str]) -> list[Reply]:
    """The same session for an endpoint answering `n=3` requests with three choices."""
    replies: list[Reply] = []
    for response in responses:
        if not is_action(response):
            replies.append(Reply(text=response))
        elif is_submit(response):
            replies.append(Reply(choices=(response,) * 3))
        else:
            replies += [Reply(choices=(response, rethought(response), OTHER)), Reply(text=PICK)]
    return replies


def settings_for(steps: int, sampling: dict[str, Any]) -> Settings:
    """Every run's settings: two calls per step, no tools, and PRICE as the price the memory's renewals weigh (the
    scripted model has none, the loopback one a list price of its own): the runs are billed with it."""
    overrides = {
        "agent": {"step_limit": steps + 10, "cost_limit": 0, "single_call": False},
        "environment": {"tools": []},
        "memory": memory_priced(PRICE),
    }
    return load_config("default", sampling=sampling, **overrides)


def timed_at_latency(workdir: Path, name: str, steps: int, seed: int, k: int, latency: float) -> tuple[float, int]:
    """Seconds per operation and requests of the session against an endpoint answering after `latency` seconds."""
    repo = make_repo(workdir / name / "repo")
    replies: list[str | Reply] = []
    for response in session_script(repo, steps, seed):
        replies += [response] * (k if is_action(response) else 1)  # identical samples: no choosing call
    config = settings_for(steps, {"k": k, "n": "never"})
    with OpenAIServer(replies=replies, latency=latency) as server:
        started = time.perf_counter()
        result = run_task(TASK, model="gpt-5-mini", base_url=server.url, settings=config,
                          output_dir=workdir / name / "out", run_id=name, repo=repo)  # fmt: skip
        seconds = time.perf_counter() - started
        requests = server.hits
    if result.exit_status != "submitted":
        raise SystemExit(f"{name}: the session ended with {result.exit_status}: {result.error}")
    return seconds / steps, requests


def run_one(workdir: Path, name: str, steps: int, seed: int, sampling: dict[str, Any], n: bool) -> Measured:
    repo = make_repo(workdir / name / "repo")
    responses = session_script(repo, steps, seed)
    config = settings_for(steps, sampling)
    started = time.perf_counter()
    kwargs = {"task": TASK, "settings": config, "output_dir": workdir / name / "out", "run_id": name, "repo": repo}
    if n:
        with OpenAIServer(replies=n_replies(responses)) as server:
            result = run_task(model="gpt-5-mini", base_url=server.url, **kwargs)
    else:
        script = workdir / name / "script.yaml"
        chosen = responses if sampling["k"] == 1 else sampled_script(responses, sampling["choice"])
        script.write_text(yaml.safe_dump({"responses": chosen}, sort_keys=False))
        result = run_task(model=f"scripted:{script}", **kwargs)
    seconds = time.perf_counter() - started
    if result.exit_status != "submitted":
        raise SystemExit(f"{name}: the session ended with {result.exit_status}: {result.error}")
    traj = load_trajectory(result.trajectory_path)
    calls = traj["model_calls"]
    raw, bill, out = bill_of(calls, PRICE)
    kinds: dict[str, int] = {}
    for call in calls:
        kinds[call["kind"]] = kinds.get(call["kind"], 0) + 1
    return Measured(name, len(calls), len(traj["operations"]), raw, bill, out, seconds, kinds)


def main(
    steps: Annotated[int, typer.Option(help="Operations in the session.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the scripted session.")] = 7,
    latency: Annotated[float, typer.Option(help="Seconds per request of the endpoint in the wall-time part.")] = 0.3,
    latency_steps: Annotated[int, typer.Option(help="Operations of the session in the wall-time part.")] = 10,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    if quick:
        steps, latency, latency_steps = 6, 0.05, 3
    console = Console(width=170)
    configs = [
        ("k=1", {"k": 1}, False),
        ("k=3 ask_colleagues", {"k": 3, "choice": "ask_colleagues"}, False),
        ("k=3 pairwise", {"k": 3, "choice": "pairwise"}, False),
        ("k=3 n (one request)", {"k": 3, "choice": "ask_colleagues", "n": "auto"}, True),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-sampling-") as tmp:
        if not quick:  # imports and caches: the seconds compare (a quick run's are not read)
            run_one(Path(tmp), "warm-up", 3, seed, {"k": 1}, False)
        runs = [run_one(Path(tmp), name.split(" ")[0].replace("=", "") + str(i), steps, seed, s, n)
                for i, (name, s, n) in enumerate(configs)]  # fmt: skip
        timed = [timed_at_latency(Path(tmp), f"latency-k{k}", latency_steps, seed, k, latency) for k in (1, 3)]
    base = runs[0]
    table = Table("configuration", "operations", "calls", "by kind", "calls/step", "prompt chars", "bill", "bill ×k=1",
                  "output chars", "seconds", title=f"Action sampling on a {steps}-step scripted session")  # fmt: skip
    for (name, _, _), run in zip(configs, runs, strict=True):
        table.add_row(
            name,
            str(run.steps),
            str(run.calls),
            ", ".join(f"{kind} {count}" for kind, count in sorted(run.kinds.items())),
            f"{run.calls / run.steps:.2f}",
            f"{run.prompt_chars:,}",
            f"{run.bill:,.0f}",
            f"{run.bill / base.bill:.2f}",
            f"{run.output_chars:,}",
            f"{run.seconds:.1f}",
        )
    console.print(table)
    title = f"Wall time at {latency} s per request ({latency_steps} operations, three identical samples)"
    wall = Table("configuration", "requests", "s / operation", "×k=1", "one after the other ×k=1", title=title)
    for k, (per_step, requests) in zip((1, 3), timed, strict=True):
        sequential = (1 + k) / 2  # rounds per operation: the reflect call and k act calls, against 1 + 1
        wall.add_row(f"k={k}", str(requests), f"{per_step:.2f}", f"{per_step / timed[0][0]:.2f}", f"{sequential:.2f}")
    console.print(wall)
    ask, pairwise, one_request = runs[1:]
    print(
        f"RESULT steps={steps} k1_calls={base.calls} k3_calls={ask.calls} k3_call_ratio={ask.calls / base.calls:.2f} "
        f"k3_bill_ratio={ask.bill / base.bill:.2f} pairwise_bill_ratio={pairwise.bill / base.bill:.2f} "
        f"n_bill_ratio={one_request.bill / base.bill:.2f} n_requests={one_request.calls} "
        f"k1_bill={base.bill:.0f} k3_bill={ask.bill:.0f} pairwise_bill={pairwise.bill:.0f} "
        f"n_bill={one_request.bill:.0f} "
        f"k3_wall_ratio_at_latency={timed[1][0] / timed[0][0]:.2f}"
    )


if __name__ == "__main__":
    typer.run(main)
