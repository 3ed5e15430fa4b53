"""The HTML inspector on a long run: a scripted 300-step session (views, greps, edits, a failed alternative every 25
steps) through the real CLI, its page opened in headless Chromium; with --screenshots, pictures of the demo run's page
and of a batch report for the docs.

    python scripts/bench_inspector.py [--steps 300] [--screenshots docs]

Prints a table and ends with `RESULT steps=… operations=… page_bytes=… open_ms=… click_ms=…`. --quick (the test
suite's: 20 steps) runs the same command lines in-process (tests/in_process.py), its figures read by no one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from in_process import invoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["argparse.py", "typing.py", "_pydecimal.py"]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
console = Console()


def act(thought: str, action_type: str, **params: object) -> str:
    return (
        f"<thought>{thought}</thought>\n<action_type>{action_type}</action_type>\n"
        f"<action_params>{json.dumps(params)}</action_params>"
    )


def reflect(bad: bool, summary: str, lessons: str = "") -> str:
    return f"<bad_action>{str(bad).lower()}</bad_action>\n<lessons>{lessons}</lessons>\n<summary>{summary}</summary>"


def session(steps: int) -> list[str]:
    """`steps` operations on the stdlib copies, every 25th a hypothesis marked bad, then submit."""
    responses: list[str] = []
    for step in range(steps - 1):
        name = FILES[step % len(FILES)]
        start = 1 + (step * 37) % 1500
        if step % 25 == 24:
            responses.append(act(f"Hypothesis {step}: the helper at [1]({name}:{start}) is unused.", "bash",
                                 command=f"grep -c 'def ' {name}"))  # fmt: skip
            responses.append(reflect(True, f"Step {step}: the helper is used; refuted.", f"Lesson {step}: grep first."))
        elif step % 10 == 9:
            responses.append(act(f"Note the finding at [1]({name}:{start}).", "bash",
                                 command=f"sed -i '{start}s/$/  # audited/' {name}"))  # fmt: skip
            responses.append(reflect(False, f"Annotated line {start} of {name}."))
        elif step % 3 == 0:
            responses.append(act(f"Search the uses near [1]({name}:{start}).", "search", pattern="def _", path=name))
            responses.append(reflect(False, f"Listed private helpers of {name}."))
        else:
            responses.append(act(f"Read {name} around line {start}.", "view", path=name, start_line=start,
                                 end_line=start + 30))  # fmt: skip
            responses.append(reflect(False, f"Read {name}:{start}-{start + 30}."))
    responses.append(act("The audit is done; submit.", "submit"))
    return responses


def cli(*args: str, quick: bool = False) -> subprocess.CompletedProcess[str]:
    """`llm-ide ARGS` as a child (its start-up is in the figures), or in-process when `quick` (~1.3 s of CPU less)."""
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    result = invoke(*args) if quick else subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"llm-ide {' '.join(args)} failed:\n{result.stderr}")
    return result


def long_run(folder: Path, steps: int, quick: bool = False) -> Path:
    repo = folder / "repo"
    repo.mkdir()
    for name in FILES:
        shutil.copy(STDLIB / name, repo / name)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"], cwd=repo, check=True)
    script = folder / "script.yaml"
    script.write_text(yaml.safe_dump({"responses": session(steps)}, sort_keys=False))
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}}))
    cli("run", "--repo", str(repo), "--task", "Audit the private helpers; annotate what you checked; submit.",
        "--model", f"scripted:{script}", "--config", str(config), "--output", str(folder / "run"),
        "--step-limit", str(steps + 5), "--thread-id", "long", quick=quick)  # fmt: skip
    return folder / "run" / "long.traj.json"


def chromium(tmp: Path):
    """Headless Chromium, its temporary files (the singleton socket's folder, which it leaves behind) under `tmp`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER), env={**os.environ, "TMPDIR": str(tmp)}), options=options)


def open_page(driver, page: Path) -> tuple[int, float, float]:
    """(drawn nodes, ms until the page is loaded and its script ran, ms to open the last node's panel)."""
    from selenium.webdriver.common.by import By

    started = time.perf_counter()
    driver.get(page.as_uri())
    nodes = driver.find_elements(By.CSS_SELECTOR, "#tree .node")
    opened = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", nodes[-1])
    driver.find_element(By.ID, "panel-observation")
    return len(nodes), opened, (time.perf_counter() - started) * 1000


def screenshots(driver, folder: Path, docs: Path) -> list[Path]:
    """The demo run's page with a failed alternative opened, and the report of a small local batch."""
    from selenium.webdriver.common.by import By

    docs.mkdir(parents=True, exist_ok=True)
    cli("demo", "--output", str(folder / "demo"))
    page = folder / "demo.html"
    cli("inspect", str(folder / "demo" / "run" / "demo.traj.json"), "--html", str(page))
    driver.get(page.as_uri())
    driver.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:1"]').click()
    shots = [docs / "inspector-run.png"]
    driver.save_screenshot(str(shots[0]))
    sys.path.insert(0, str(ROOT / "tests"))
    from swebench_fixtures import FIX_COMMAND, build_dataset, write_config, write_script

    from llm_ide.swebench.batch import BatchOptions, run_swebench

    dataset, rows = build_dataset(folder / "data", 6)
    model = write_script(folder / "fix.yaml", ["grep -rn '# BUG' --include='*.py' .", FIX_COMMAND])
    short = write_config(folder / "short.yaml", step_limit=1)
    for configs, only in (([short], "demo__calc-2"), ([write_config(folder / "c.yaml")], "")):
        options = BatchOptions(model=model, output=folder / "batch", environment="local", config_files=configs)
        run_swebench(str(dataset), "test", options, filter_regex=only)
    ids = sorted(row["instance_id"] for row in rows)
    report = {"resolved_ids": [i for i in ids if i != "demo__calc-2"][:4], "unresolved_ids": ["demo__calc-2"]}
    (folder / "batch" / "report.json").write_text(json.dumps(report))
    cli("report", str(folder / "batch"), "--html", str(folder / "report.html"))
    driver.set_window_size(1200, 520)
    driver.get((folder / "report.html").as_uri())
    shots.append(docs / "inspector-report.png")
    driver.save_screenshot(str(shots[1]))
    return shots


def main(
    steps: Annotated[int, typer.Option(help="Operations in the long run.")] = 300,
    docs: Annotated[Path | None, typer.Option("--screenshots", help="Write the docs' screenshots here.")] = None,
    quick: Annotated[bool, typer.Option(help="Small sizes, the same comparison: what the test suite runs.")] = False,
) -> None:
    steps = 20 if quick else steps
    with tempfile.TemporaryDirectory(prefix="bench-inspector-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        trajectory = long_run(folder, steps, quick)
        run_seconds = time.perf_counter() - started
        operations = len(json.loads(trajectory.read_text())["operations"])
        page = folder / "long.html"
        started = time.perf_counter()
        cli("inspect", str(trajectory), "--html", str(page), quick=quick)
        render_ms = (time.perf_counter() - started) * 1000
        size = page.stat().st_size
        driver = chromium(folder)
        try:
            open_page(driver, page)  # warm the browser's caches once; the second open is the figure
            drawn, open_ms, click_ms = open_page(driver, page)
            shots = screenshots(driver, folder, docs) if docs else []
        finally:
            driver.quit()
    table = Table(title=f"inspector page of a {steps}-step scripted run")
    for column in (
        "operations",
        "drawn nodes",
        "page bytes",
        "render (CLI, ms)",
        "open in Chromium (ms)",
        "click (ms)",
    ):
        table.add_column(column, justify="right")
    table.add_row(str(operations), str(drawn), f"{size:,}", f"{render_ms:.0f}", f"{open_ms:.0f}", f"{click_ms:.0f}")
    console.print(table)
    console.print(f"(the run itself took {run_seconds:.1f} s)")
    for shot in shots:
        console.print(f"screenshot: {shot}")
    print(  # one line whatever the console's width (rich would wrap it at 80 columns in a pipe)
        f"RESULT steps={steps} operations={operations} drawn={drawn} page_bytes={size} "
        f"open_ms={open_ms:.0f} click_ms={click_ms:.0f}"
    )


if __name__ == "__main__":
    typer.run(main)
