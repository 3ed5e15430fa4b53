"""What the inspector's tests share (test_inspector, test_inspector_charts, test_inspector_page,
test_inspector_report): the CLI in-process, a headless Chromium, the demo run and its page, a run that writes its
reproduction tests before its first step."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import agent_script
import pytest
import reproduction_scripts
from conftest import make_git_repo, unavailable
from in_process import invoke

from llm_ide import run_task
from llm_ide.run.trajectory import load_trajectory

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args)


def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium (a session fixture's: one per worker); its temporary files (the singleton socket's
    folder, which it leaves behind) under the session's tmp, not /tmp."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = f"{', '.join(missing)} missing (apt-get install chromium chromium-driver)"
        unavailable(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    env = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))}
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER), env=env), options=options)
    yield driver
    driver.quit()


def text_of(element: object) -> str:
    return element.get_attribute("textContent")  # type: ignore[attr-defined]


@functools.cache
def demo_run_in(base: Path) -> tuple[dict, Path]:
    """The demo run (a failed alternative, a fix, tests, submit) and its inspector page, made by the CLI in `base`
    (the session's tmp) once a worker, whichever of the test modules asks first."""
    folder = base / "demo"
    folder.mkdir()
    assert cli("demo", "--output", str(folder / "d")).returncode == 0
    trajectory = folder / "d" / "run" / "demo.traj.json"
    result = cli("inspect", str(trajectory), "--html", str(folder / "page.html"))
    assert result.returncode == 0, result.stderr
    assert f"→ {folder / 'page.html'}" in result.stdout
    return load_trajectory(trajectory), folder / "page.html"


def reproduction_run(tmp_path: Path) -> Path:
    """Two reproduction tests written (one dropped) before the first step, their calls recorded at step 0; then a fix
    in three steps. Its trajectory, and its page beside it (p.html)."""
    shows_nothing = "import calc\nprint('double(1) =', calc.double(1))\nprint('Issue resolved')\n"
    script = [reproduction_scripts.written(test) for test in (shows_nothing, reproduction_scripts.REPRO)]
    script += reproduction_scripts.fix_script(reproduction_scripts.RIGHT)
    model = agent_script.write_script(tmp_path / "m.yaml", script)
    repo = make_git_repo(tmp_path / "repo", reproduction_scripts.FILES)
    settings = reproduction_scripts.config(generate=True)
    task = reproduction_scripts.TASK
    result = run_task(task, model=model, settings=settings, output_dir=tmp_path / "out", run_id="G", repo=repo)
    assert cli("inspect", str(result.trajectory_path), "--html", str(tmp_path / "p.html")).returncode == 0
    return result.trajectory_path
