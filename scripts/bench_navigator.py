#!/usr/bin/env python
"""The navigator's cost (issue 12), in one run, side by side.

(a) Permission gate overhead without a model: the same scripted driver session (edits and commands that change
    things, every one gated) runs on the plain graph and on the navigator graph whose navigator approves at once (no
    model: what is left is the gate itself — the gate rule, the diff preview, the driver's code context rendered for
    the request, the records). Every node is timed through `build_graph(wrap=...)`, the gate around each action
    without the action it wraps; its time per gated step is the overhead (goal ≤ 5 ms), and the whole run's wall
    time per step is shown for both graphs.
(b) Navigator cost share of a scripted run: a model navigator (scripted) plans with read-only exploration, gates the
    driver's edits and commands, and reviews the submit; driver and navigator tokens are priced alike (gpt-5-mini's
    prices from the default config: a scripted model's own cost is 0) and the navigator's share of the total is given.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from llm_ide.composition import compose
from llm_ide.config import load_config
from llm_ide.graph import build_graph
from llm_ide.navigator.protocol import Decision, Guidance, PermissionRequest, Review, ReviewRequest
from llm_ide.navigator.variant import Navigator
from llm_ide.priced import find_price
from llm_ide.run.setup import build_context
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

console = Console()
PRICED_AS = "gpt-5-mini"


class ApprovingNavigator:
    """Answers at once, approving everything: the permission node measured without a model."""

    def request_permission(self, request: PermissionRequest) -> Decision:
        return Decision(approved=True, reason="ok")

    def request_review(self, request: ReviewRequest) -> Review:
        return Review(passed=True, comment="ok")

    def request_guidance(self, question: str) -> Guidance:
        return Guidance(answer="ok")


def act(thought: str, action: str, **params: Any) -> str:
    return f"{thought}\n<{action}>{json.dumps(params)}</{action}>"


def make_repo(root: Path, functions: int) -> Path:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    body = "".join(
        f"def f{i}(x):\n    total = 0\n    for item in range({i}):\n        total += item * x\n    return total\n\n\n"
        for i in range(functions)
    )
    (repo / "pkg" / "calc.py").write_text(body)
    (repo / "pkg" / "__init__.py").write_text("")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=repo, check=True)
    return repo


def driver_script(steps: int) -> list[str]:
    responses = [act("Read calc[1](pkg/calc.py:1).", "view", path="pkg/calc.py", start_line=1, end_line=120)]
    for i in range(steps):
        responses.append("good: done")
        if i % 2 == 0:
            old, new = f"    for item in range({i}):\n", f"    for item in range({i} + 1):\n"
            responses.append(
                act(f"Widen f{i}[1](pkg/calc.py:{7 * i + 3}).", "edit", path="pkg/calc.py", old=old, new=new)
            )
        else:
            responses.append(
                act(f"Note step {i}[1](pkg/calc.py:{7 * i + 1}).", "bash", command=f"echo {i} >> notes.txt")
            )
    return [*responses, "good: done", act("Done.", "submit")]


def timed_nodes(times: dict[str, list[float]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Each node's wall time (`NAME`) and its thread's CPU time (`NAME cpu`: what the node costs, whatever the load)."""

    def wrap(node: Callable[..., Any]) -> Callable[..., Any]:
        def timed(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return node(state, runtime)
            finally:
                times[node.__name__].append(time.perf_counter() - started)
                times[f"{node.__name__} cpu"].append(time.thread_time() - cpu)

        timed.__name__ = node.__name__
        return timed

    return wrap


class TimedGate(Navigator):
    """The navigator's gate, timed without the action it wraps (wall and the thread's CPU time)."""

    def __init__(self, times: dict[str, list[float]]) -> None:
        super().__init__("model")
        self.times = times

    def wrap_action(self, ctx: Any, state: Any, node: Any, run: Callable[[Any], Any]) -> Any:
        inner = [0.0, 0.0]

        def timed_run(pending: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return run(pending)
            finally:
                inner[0] += time.perf_counter() - started
                inner[1] += time.thread_time() - cpu

        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return super().wrap_action(ctx, state, node, timed_run)
        finally:
            self.times["permission"].append(time.perf_counter() - started - inner[0])
            self.times["permission cpu"].append(time.thread_time() - cpu - inner[1])


def session(root: Path, steps: int, navigator: bool) -> tuple[dict[str, list[float]], float, dict[str, Any]]:
    repo = make_repo(root / ("nav" if navigator else "plain"), 40)
    script = root / f"driver-{navigator}.yaml"
    script.write_text(yaml.safe_dump({"responses": driver_script(steps)}))
    mode = {"mode": "model", "plan": False} if navigator else {}
    settings = load_config("default", environment={"tools": []}, agent={"step_limit": 0}, navigator=mode)
    times: dict[str, list[float]] = defaultdict(list)
    variants = compose(settings, [TimedGate(times)] if navigator else [])
    ctx = build_context(
        settings=settings, model_spec=f"scripted:{script}", run_id="bench", repo=repo, variants=variants
    )
    if navigator:
        ctx.resources["navigator"] = ApprovingNavigator()
    graph = build_graph(None, wrap=timed_nodes(times), variants=ctx.variants)
    started = time.perf_counter()
    final = graph.invoke({"task": "Widen the loops.", "repo": str(repo), "model": "scripted"}, context=ctx)
    wall = time.perf_counter() - started
    ctx.codebase.env.close()
    return times, wall, final


def cost_share(root: Path) -> dict[str, float]:
    repo = make_repo(root / "share", 12)
    fix = act("f3's loop[1](pkg/calc.py:17).", "edit", path="pkg/calc.py", old="range(3)", new="range(3 + 1)")
    test = act("Check it compiles[1](pkg/calc.py:17).", "bash", command="python3 -m py_compile pkg/calc.py && echo ok")
    driver = [act("Read f3[1](pkg/calc.py:15).", "view_symbol", path="pkg/calc.py", symbol="f3"), "good: f3 read", fix]
    driver += ["good: widened", test, "good: compiles", act("Done.", "submit")]
    navigator = [
        act("Where is f3?", "search", pattern="def f3", path="pkg"),
        act("Read it[1](pkg/calc.py:15).", "view_symbol", path="pkg/calc.py", symbol="f3"),
        "<plan>1. In f3 widen range(3) to range(3 + 1).\n2. Check that pkg/calc.py compiles.</plan>",
        "<approve>The planned change.</approve>",
        "<approve>A harmless check.</approve>",
        act("Look at the change.", "bash", command="git diff"),
        "<pass>f3 is widened and the module compiles.</pass>",
    ]
    for name, responses in (("driver", driver), ("navigator", navigator)):
        (root / f"{name}.yaml").write_text(yaml.safe_dump({"responses": responses}))
    nav = {"mode": "model", "model": f"scripted:{root / 'navigator.yaml'}", "review_on_submit": True}
    settings = load_config("default", environment={"tools": []}, navigator=nav)
    result = run_task(
        "Widen f3's loop by one.",
        model=f"scripted:{root / 'driver.yaml'}",
        settings=settings,
        output_dir=root / "out",
        run_id="share",
        repo=repo,
    )
    info = load_trajectory(result.trajectory_path)["info"]
    price = find_price(PRICED_AS, settings.model.prices)
    assert price is not None and result.exit_status == "submitted", result
    driver_usage, nav_usage = info["model_stats"], info["navigator"]["usage"]
    driver_cost = price.cost(driver_usage["input_tokens"], driver_usage["output_tokens"])
    nav_cost = price.cost(nav_usage["input_tokens"], nav_usage["output_tokens"])
    return {
        "driver_calls": driver_usage["api_calls"],
        "navigator_calls": nav_usage["api_calls"],
        "driver_tokens": driver_usage["input_tokens"] + driver_usage["output_tokens"],
        "navigator_tokens": nav_usage["input_tokens"] + nav_usage["output_tokens"],
        "driver_cost": driver_cost,
        "navigator_cost": nav_cost,
        "share": nav_cost / (nav_cost + driver_cost),
    }


def main(
    steps: int = typer.Option(40, help="Gated driver steps per session."),
    quick: bool = typer.Option(False, help="Small sizes, the same comparison: what the test suite runs."),
) -> None:
    steps = 5 if quick else steps
    with tempfile.TemporaryDirectory(prefix="bench-navigator-") as tmp:
        root = Path(tmp)
        plain_times, plain_wall, plain = session(root, steps, navigator=False)
        nav_times, nav_wall, final = session(root, steps, navigator=True)
        gated = len(final["navigator"]["decisions"])
        assert gated == steps and final["exit_status"] == plain["exit_status"] == "submitted", final.get("exit_status")
        share = cost_share(root)
    # the non-gated steps (the first view, the submit) return at once: the `gated` longest calls are the gated steps
    gated_ms = sorted(1000 * t for t in nav_times["permission"])[-gated:]
    cpu_ms = sorted(1000 * t for t in nav_times["permission cpu"])[-gated:]
    median, mean, p90 = statistics.median(gated_ms), statistics.fmean(gated_ms), gated_ms[int(0.9 * (gated - 1))]
    cpu_median, cpu_mean = statistics.median(cpu_ms), statistics.fmean(cpu_ms)
    table = Table("", "plain graph", "navigator graph (approves at once)", title=f"{steps} gated steps")
    n_plain, n_nav = plain["n_operations"], final["n_operations"]
    table.add_row("operations", str(n_plain), str(n_nav))
    table.add_row("wall ms / step", f"{1000 * plain_wall / n_plain:.1f}", f"{1000 * nav_wall / n_nav:.1f}")
    table.add_row(
        "permission gate wall ms / gated step (median, mean, p90)", "—", f"{median:.2f}, {mean:.2f}, {p90:.2f}"
    )
    table.add_row("permission gate CPU ms / gated step (median, mean)", "—", f"{cpu_median:.2f}, {cpu_mean:.2f}")
    for node in ("act", "execute_tool", "update_activity"):
        plain_ms, nav_ms = (1000 * statistics.median(t[node]) for t in (plain_times, nav_times))
        table.add_row(f"{node} ms (median)", f"{plain_ms:.2f}", f"{nav_ms:.2f}")
    console.print(table)
    costs = Table("", "driver", "navigator", title=f"a scripted run, tokens priced as {PRICED_AS}")
    costs.add_row("model calls", str(share["driver_calls"]), str(share["navigator_calls"]))
    costs.add_row("tokens", str(share["driver_tokens"]), str(share["navigator_tokens"]))
    costs.add_row("cost $", f"{share['driver_cost']:.5f}", f"{share['navigator_cost']:.5f}")
    console.print(costs)
    overhead = 1000 * (nav_wall / n_nav - plain_wall / n_plain)
    print(
        f"RESULT permission_ms_median={median:.2f} permission_ms_mean={mean:.2f} permission_ms_p90={p90:.2f} "
        f"permission_cpu_ms_median={cpu_median:.2f} permission_cpu_ms_mean={cpu_mean:.2f} "
        f"wall_overhead_ms_per_step={overhead:.2f} navigator_cost_share={share['share']:.2f}"
    )


if __name__ == "__main__":
    typer.run(main)
