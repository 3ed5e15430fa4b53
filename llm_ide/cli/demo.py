"""`llm-ide demo`: the full agent on a bundled buggy project, offline (a scripted model); Ctrl-C says where it stopped
and the command that continues it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from llm_ide.cli.console import (
    StepPrinter,
    Thoughts,
    console,
    err_console,
    fail,
    interrupted_exit,
    print_interrupted,
    write_patch,
)
from llm_ide.cli.run import report
from llm_ide.cli.run_options import Verbose
from llm_ide.cli.status import ThinkingStatus
from llm_ide.errors import ExitStatus, install_signal_policy

DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"
RUN_ID = "demo"


def demo(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to keep the demo project and its run; an interrupted demo there continues.",
            show_default="a new llm-ide-demo-* temp dir",
        ),
    ] = None,
    verbose: Verbose = False,
    thoughts: Thoughts = True,
) -> None:
    """Fix a small bug in a bundled project, offline, with the full agent and a scripted model."""
    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    streamed = {"model": {"stream": True}} if verbose else {}
    status = ThinkingStatus(console, verbose, err_console)

    workdir = output or Path(tempfile.mkdtemp(prefix="llm-ide-demo-"))
    project, checkpoint = workdir / "project", workdir / "run" / f"{RUN_ID}.checkpoint.sqlite"
    resuming = project.exists() and checkpoint.exists() and not finished(workdir / "run" / f"{RUN_ID}.traj.json")
    if project.exists() and not resuming:
        raise fail(f"{workdir} already holds a demo project: give another --output, or remove {project}")
    install_signal_policy()  # SIGTERM/SIGHUP end the demo like Ctrl-C
    try:
        task = prepare(project, resuming)
        result = run_task(
            task,
            model=f"scripted:{DEMO_DIR / 'script.yaml'}",
            settings=load_config("default", overrides=[DEMO_DIR / "config.yaml"], **streamed),
            output_dir=workdir / "run",
            run_id=RUN_ID,
            repo=project,
            on_event=StepPrinter(thoughts=thoughts and not verbose),  # -v showed the reply, its reasoning too
            on_model_call=status,
            on_command=status.command,
        )
    except KeyboardInterrupt as interrupt:
        status.stop()
        if checkpoint.exists():
            stopped = f"the demo stopped at its last completed step ({workdir / 'run'})"
            print_interrupted(stopped, *([] if output else ["--output", str(workdir)]))
        else:
            print_interrupted(f"the demo stopped before its first step; its folder {workdir} can be removed")
        raise interrupted_exit(interrupt) from None
    try:
        passed, verdict = unittest_verdict(project)
    except KeyboardInterrupt as interrupt:  # the run has ended: its patch is kept, nothing is left to resume
        write_patch(result.submission, workdir / "run" / f"{RUN_ID}.patch")
        report(result)
        err_console.print(f"[bold yellow]interrupted[/]: the tests after the run were stopped ({workdir / 'run'})")
        raise interrupted_exit(interrupt) from None
    console.print(f"[bold]Tests after the run:[/] {verdict}")
    write_patch(result.submission, workdir / "run" / f"{RUN_ID}.patch")
    report(result)
    console.print(next_commands(result.trajectory_path))
    raise typer.Exit(0 if result.exit_status == ExitStatus.SUBMITTED and passed else 1)


def next_commands(trajectory: Path) -> str:
    """What to do after the demo: look at its run, then run the agent on a project of one's own."""
    quoted = shlex.quote(str(trajectory))
    return (
        "[bold]next:[/]\n"
        f"  llm-ide inspect {escape(quoted)} --html     [dim]# the run as one page: every step, the prompts[/]\n"
        '  llm-ide run --repo ./myproject --task "..." --model openai:gpt-5-mini   '
        "[dim]# a project of yours (docs/running.md; a local model: docs/local-models.md)[/]"
    )


def finished(trajectory: Path) -> bool:
    """Whether the demo whose trajectory this is has ended (an interrupted one continues)."""
    try:
        status = json.loads(trajectory.read_text(encoding="utf-8"))["info"]["exit_status"]
        return ExitStatus(status).finished
    except (OSError, ValueError, KeyError, TypeError):
        return False


def prepare(project: Path, resuming: bool) -> str:
    """The demo's task; its project copied and committed first (unless an interrupted demo is continued)."""
    if not resuming:
        try:
            shutil.copytree(DEMO_DIR / "project", project)
        except OSError as error:
            raise fail(
                f"output folder {project.parent}: cannot make it ({error.strerror}); give another --output"
            ) from None
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "demo project"]):
            subprocess.run(
                ["git", "-c", "user.name=llm-ide", "-c", "user.email=demo@llm-ide", *args], cwd=project, check=True
            )
    task = (DEMO_DIR / "task.md").read_text(encoding="utf-8")
    console.print(f"[bold]Task[/] (project {'continued' if resuming else 'copied'} in {project}):\n{task}")
    if not resuming:
        console.print(f"[bold]Tests before the run:[/] {unittest_verdict(project)[1]}")
    return task


def unittest_verdict(project: Path) -> tuple[bool, str]:
    check = subprocess.run(
        ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."], cwd=project, capture_output=True, text=True
    )
    return check.returncode == 0, (check.stderr.strip().splitlines() or ["(no output)"])[-1]
