from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
PREFLIGHT_TIMEOUT = 2.0  # seconds to connect to the model's endpoint before the run starts
DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"


def fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(2)


def print_event(event) -> None:
    if event.kind == "tool":
        tool_progress()(event.tool)
    elif event.kind == "phase":
        console.print(f"[dim]… {event.phase}[/]")
    elif event.kind == "step":
        first = next((line for line in event.observation.splitlines() if line.strip()), "")
        console.print(f"[bold cyan]step {event.step:>3}[/] {escape(event.action[:110])}")
        if first:
            console.print(f"         [dim]→ {escape(first[:110])}[/]  [green]${event.cost:.4f}[/]")


@functools.cache
def tool_progress():
    from llm_ide.tools.progress import ToolProgress

    return ToolProgress(console)


def terminate_on_sigterm() -> None:
    """SIGTERM ends a run like Ctrl-C: trajectory saved, environment removed, checkpoint kept for a resume."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def run(
    repo: Annotated[Path, typer.Option(help="Repository to work on (local: edited in place; docker: copied in).")],
    task: Annotated[str | None, typer.Option(help="The task text.")] = None,
    task_file: Annotated[Path | None, typer.Option(help="A file holding the task text.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="provider:name, scripted:PATH, or an OpenAI-compatible name ($LLM_IDE_MODEL)."),
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint ($OPENAI_BASE_URL).")] = None,
    config: Annotated[list[Path] | None, typer.Option(help="YAML file(s) overriding any config key.")] = None,
    output: Annotated[Path | None, typer.Option(help="Output directory (default runs/<thread id>).")] = None,
    step_limit: Annotated[int | None, typer.Option(help="Maximum number of operations.")] = None,
    cost_limit: Annotated[float | None, typer.Option(help="Maximum model cost in USD.")] = None,
    thread_id: Annotated[str | None, typer.Option(help="Run id; an unfinished run with this id resumes.")] = None,
    checkpoint: Annotated[str | None, typer.Option(help="sqlite:PATH | postgres://… | memory.")] = None,
    environment: Annotated[str | None, typer.Option(help="local or docker.")] = None,
    image: Annotated[str | None, typer.Option(help="Docker image (with --environment docker).")] = None,
) -> None:
    """Run the agent on one task in a repository."""
    from llm_ide.config import ConfigError, load_config

    if (task is None) == (task_file is None):
        raise fail("give exactly one of --task TEXT or --task-file FILE")
    if task_file is not None and not task_file.is_file():
        raise fail(f"task file not found: {task_file}")
    if not repo.is_dir():
        raise fail(f"repository not found: {repo}")
    model = model or os.environ.get("LLM_IDE_MODEL")
    if not model:
        raise fail("no model: pass --model (e.g. openai:gpt-5-mini, scripted:script.yaml) or set LLM_IDE_MODEL")
    try:
        settings = load_config("default", overrides=config or [])
    except ConfigError as error:
        raise fail(str(error)) from None
    limits = {k: v for k, v in (("step_limit", step_limit), ("cost_limit", cost_limit)) if v is not None}
    try:
        settings = settings.merged({"agent": limits}, origin="command line") if limits else settings
    except ConfigError as error:
        raise fail(str(error)) from None
    check_model_before_start(model, settings, base_url)
    from llm_ide.run.single import run_task

    run_id = thread_id or time.strftime("run-%Y%m%d-%H%M%S")
    output = output or Path("runs") / run_id
    terminate_on_sigterm()
    result = run_task(
        task if task is not None else task_file.read_text(encoding="utf-8"),
        model=model,
        settings=settings,
        output_dir=output,
        run_id=run_id,
        repo=repo.resolve(),
        environment=environment,
        image=image,
        base_url=base_url,
        checkpoint=checkpoint,
        on_event=print_event,
    )
    report(result)
    if result.exit_status == "environment_error" and not result.model_stats["api_calls"]:
        raise typer.Exit(2)  # the environment could not start: a set-up problem, told in one line above
    raise typer.Exit(0 if result.exit_status == "submitted" else 1)


def check_model_before_start(model: str, settings, base_url: str | None) -> None:
    """Model name, API key and endpoint: checked before the environment starts and the tools install."""
    from llm_ide.swebench.preflight import SWEbenchError, check_model

    try:
        check_model(model, settings, base_url, timeout=PREFLIGHT_TIMEOUT)
    except SWEbenchError as error:
        raise fail(str(error)) from None


def report(result) -> None:
    stats = result.model_stats
    colour = "green" if result.exit_status == "submitted" else "yellow"
    console.print(
        f"[bold {colour}]{result.exit_status}[/] after {stats['api_calls']} model calls, "
        f"{stats['input_tokens']}+{stats['output_tokens']} tokens, ${stats['cost']:.4f}"
    )
    if result.error:
        err_console.print(f"[red]{escape(result.error)}[/]")
    console.print(f"trajectory: {result.trajectory_path}")


def demo(
    output: Annotated[Path | None, typer.Option(help="Where to keep the demo project and its run.")] = None,
) -> None:
    """Fix a small bug in a bundled project, offline, with the full agent and a scripted model."""
    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    workdir = output or Path(tempfile.mkdtemp(prefix="llm-ide-demo-"))
    project = workdir / "project"
    if project.exists():
        raise fail(f"{workdir} already holds a demo project: give another --output, or remove {project}")
    shutil.copytree(DEMO_DIR / "project", project)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "demo project"]):
        subprocess.run(
            ["git", "-c", "user.name=llm-ide", "-c", "user.email=demo@llm-ide", *args], cwd=project, check=True
        )
    task = (DEMO_DIR / "task.md").read_text(encoding="utf-8")
    console.print(f"[bold]Task[/] (project copied to {project}):\n{task}")
    console.print(f"[bold]Tests before the run:[/] {unittest_verdict(project)[1]}")
    settings = load_config("default", overrides=[DEMO_DIR / "config.yaml"])
    result = run_task(
        task,
        model=f"scripted:{DEMO_DIR / 'script.yaml'}",
        settings=settings,
        output_dir=workdir / "run",
        run_id="demo",
        repo=project,
        on_event=print_event,
    )
    passed, verdict = unittest_verdict(project)
    console.print(f"[bold]Tests after the run:[/] {verdict}")
    console.print("[bold]Patch:[/]")
    console.print(result.submission, markup=False)
    report(result)
    raise typer.Exit(0 if result.exit_status == "submitted" and passed else 1)


def unittest_verdict(project: Path) -> tuple[bool, str]:
    check = subprocess.run(
        ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."], cwd=project, capture_output=True, text=True
    )
    return check.returncode == 0, (check.stderr.strip().splitlines() or ["(no output)"])[-1]


def inspect(
    trajectory: Annotated[Path, typer.Argument(help="A <run id>.traj.json file (llm-ide or mini-swe-agent).")],
    out: Annotated[
        Path | None, typer.Argument(help="With --html: the page to write (default: <run id>.html beside it).")
    ] = None,
    html: Annotated[bool, typer.Option("--html", help="Write a self-contained HTML inspector page.")] = False,
) -> None:
    """Show a trajectory's operation tree (failed alternatives marked) and the size of every prompt."""
    import json

    if html or out is not None:
        from llm_ide.cli.inspector import write_inspector_page

        if not html:
            raise fail(f"{out}: an output page is only written with --html")
        return write_inspector_page(trajectory, out)

    from rich.table import Table
    from rich.tree import Tree

    from llm_ide.state.operations import OperationNode, reasoning_chain

    if not trajectory.is_file():
        raise fail(f"trajectory not found: {trajectory}")
    try:
        data = json.loads(trajectory.read_text(encoding="utf-8"))
        nodes = [OperationNode(**node) for node in data["operations"]]
    except (ValueError, KeyError, TypeError) as error:
        raise fail(f"{trajectory} is not an llm-ide trajectory: {error}") from None
    chain = {node.id for node in reasoning_chain(nodes)}
    info = data["info"]
    stats = info["model_stats"]
    root = Tree(
        f"[bold]{info.get('run_id', trajectory.stem)}[/]: {info['exit_status']} — {len(nodes)} operations, "
        f"{stats['api_calls']} model calls, ${stats['cost']:.4f}"
    )
    branches = {None: root}
    for node in nodes:
        params = json.dumps(node.action_params, ensure_ascii=False)
        label = escape(f"[{node.id}] {node.action_type} {params[:80]}")
        if node.id not in chain:
            label = f"[red]✗ {label}[/] [dim](failed alternative)[/]"
        elif node.bad_action:
            label = f"[yellow]{label}[/] [dim](marked bad)[/]"
        if node.summary:
            label += f"\n[dim]{escape(node.summary[:160])}[/]"
        branches[node.id] = branches[node.parent_id].add(label)
    console.print(root)
    table = Table("call", "kind", "prompt chars", "prompt tokens", "response tokens", "cost")
    for call in data.get("model_calls", []):
        table.add_row(
            str(call["index"]),
            call["kind"],
            str(call["prompt_chars"]),
            str(call["prompt_tokens"]),
            str(call["response_tokens"]),
            f"${call['cost']:.4f}",
        )
    console.print(table)
