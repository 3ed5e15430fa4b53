"""Issue 41: the user's Python inside the sandbox, and a verification that could not run says so.

§1 the sandboxed commands see the Python environment the user works in wherever it lives (under the hidden home
directory too): the active venv, virtualenvwrapper's, Poetry's and Pipenv's environment of the repository, an
editable install's project — read-only, never the credential folders — and the run's start says which one they use.
§2 a regression baseline that ran no test, a test command that cannot start, a reproduction that never reached the
code are each "could not verify" with the reason, on the console and in the trajectory, and rank below a verified
attempt. §3 (slow) the README's set-up into a venv under a temporary $HOME, and the execution-choice and reproduction
tests run from there, as root and as a plain user."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from attempts_scripts import choice, review, scripts
from conftest import make_git_repo, require_bwrap, unavailable
from in_process import invoke
from reproduction_scripts import FILES, HARDCODED, REPRO, RIGHT, TASK, WRONG, config, fix_script

from llm_ide import run_attempts
from llm_ide.environments import LocalEnvironment
from llm_ide.environments.pythons import probe
from llm_ide.reproduction.script import script
from llm_ide.reproduction.variant import Reproduction
from llm_ide.run.trajectory import load_trajectory

REPO_ROOT = Path(__file__).resolve().parents[1]
IMPORTS = "import userdep, sys; print('imported', userdep.WHERE, 'prefix', sys.prefix)"
CREDENTIALS = {".ssh/id_ed25519": "PRIVATE-KEY-MARKER", ".aws/credentials": "AWS-MARKER", ".netrc": "NETRC-MARKER"}


def venv_with(prefix: Path, module: str = "userdep") -> Path:
    """A venv (no pip: fast) holding `module`, which no other environment has."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    site = next(prefix.glob("lib/python3*/site-packages"))
    (site / f"{module}.py").write_text(f"WHERE = {str(prefix)!r}\n")
    return prefix


def poetry_prefix(home: Path, repo: Path, name: str) -> Path:
    digest = hashlib.sha256(os.path.normcase(os.path.realpath(repo)).encode()).digest()
    short = base64.urlsafe_b64encode(digest).decode()[:8]
    return home / ".cache" / "pypoetry" / "virtualenvs" / f"{name}-{short}-py3.11"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory of its own, with credentials in it."""
    folder = tmp_path / "home"
    for name, text in CREDENTIALS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    monkeypatch.setenv("HOME", str(folder))
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX", "UV_PROJECT_ENVIRONMENT", "WORKON_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    return folder


@pytest.mark.parametrize("where", ["venv under home", "virtualenvwrapper", "poetry", "pipenv", "venv outside home"])
def test_the_commands_see_the_users_python_and_never_the_credentials(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    require_bwrap()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    if where == "poetry":
        (repo / "pyproject.toml").write_text('[tool.poetry]\nname = "Proj"\nversion = "1"\n')
        prefix = venv_with(poetry_prefix(home, repo, "proj"))
    elif where == "pipenv":
        (repo / "Pipfile").write_text("[packages]\n")
        prefix = venv_with(home / ".local" / "share" / "virtualenvs" / "repo-AbCd1234")
        (prefix / ".project").write_text(str(repo))
    else:
        folder = {"venv under home": home / "venvs", "virtualenvwrapper": home / ".virtualenvs"}.get(where)
        prefix = venv_with((folder or tmp_path / "outside") / "proj")
        monkeypatch.setenv("VIRTUAL_ENV", str(prefix))
        monkeypatch.setenv("PATH", f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}")
    project = home / "src" / "mylib"  # an editable install of the user's own library, kept in the home directory
    (project / "mylib").mkdir(parents=True)
    (project / "mylib" / "__init__.py").write_text("NAME = 'mylib'\n")
    site = next(prefix.glob("lib/python3*/site-packages"))
    (site / "mylib.pth").write_text(f"{project}\n")
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    try:
        python = "python3" if "venv" in where else str(prefix / "bin" / "python")
        code = f"{IMPORTS}; import mylib; print(mylib.NAME)"
        used = env.execute(f"{python} -c {json.dumps(code)}; touch {prefix}/written; echo touched=$?").output
        looked = env.execute(f"cat {' '.join(str(home / name) for name in CREDENTIALS)}").output
        listing = env.execute(f"ls -A {home}").output.split()
    finally:
        env.close()
    assert f"imported {prefix} prefix {prefix}\nmylib\n" in used and "touched=1" in used, used  # read-only
    assert not any(marker in looked for marker in CREDENTIALS.values()), looked
    assert {".ssh", ".aws", ".netrc"}.isdisjoint(listing) and "src" in listing
    if "venv" in where:
        assert env.notes == [env.notes[0]] and f"at {prefix}/bin/python3 (the active virtualenv)" in env.notes[0]
    if where != "venv outside home":
        assert str(prefix) in env.notes[0].split("shown read-only: ")[1]


SHIM = '#!/bin/sh\necho "[\\"/p\\", \\"/p\\", \\"/p\\", \\"/p\\", [], \\"$(cat .python-version)\\"]"\n'


def test_an_interpreter_is_asked_once_wherever_the_run_is_and_a_shim_in_each_folder(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binary answers the same in every repository: one probe per process (a run each, before); a version manager's
    shim (a script) reads the folder's `.python-version`, so it is asked in each folder; another home, asked again."""
    folders = [tmp_path / name for name in ("a", "b")]
    for folder, version in zip(folders, ("3.10.4", "3.12.1"), strict=True):
        folder.mkdir()
        (folder / ".python-version").write_text(version)
    path = os.environ["PATH"]
    venv = str(venv_with(tmp_path / "venv") / "bin" / "python3")
    first, second = (probe(venv, path, str(folder)) for folder in folders)
    assert first is second and first is not None and first.prefix == str(tmp_path / "venv")
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(SHIM)
    shim.chmod(0o755)
    asked = [probe(str(shim), path, str(folder)) for folder in (*folders, folders[0])]
    assert [found.version if found else None for found in asked] == ["3.10.4", "3.12.1", "3.10.4"]
    assert asked[2] is asked[0]
    monkeypatch.setenv("HOME", str(tmp_path))
    again = probe(venv, path, str(folders[0]))
    assert again == first and again is not first


def events_of(tmp_path: Path, **fields: object) -> tuple[object, list[str]]:
    said: list[str] = []
    result = run_attempts(TASK, on_event=lambda event: said.append(str(getattr(event, "phase", "") or "")), **fields)
    return result, said


def test_a_baseline_that_ran_no_test_could_not_verify_and_is_never_a_pass(tmp_path: Path) -> None:
    """The regression command cannot start its runner: the baseline ran no test. Before, each attempt was told
    "regressions (clean run): 0 of 0 tests that passed before" and ranked as clean; now that check could not verify
    (said on the console and in the trajectory), and no attempt is picked by it: the models choose."""
    reviews = [review(9, "double(2) is 4 now."), review(5, "Maybe.")]
    model = scripts(tmp_path / "scripts", [fix_script(HARDCODED, check=False), fix_script(RIGHT, check=False)], reviews,
                    [choice(2, "The general fix.")])  # fmt: skip
    settings = config(regression_command="python3 -m no_such_test_runner_xyz {{ files }}").merged(
        {"attempts": {"max": 2}}
    )
    repo = make_git_repo(tmp_path / "repo", FILES)
    result, said = events_of(tmp_path, model=model, settings=settings, output_dir=tmp_path / "out", run_id="B",
                             repo=repo, variants=[Reproduction(script(REPRO))])  # fmt: skip
    traj = load_trajectory(result.trajectory_path)
    assert result.exit_status == "submitted" and traj["info"]["choice"]["by"] != "execution"
    infos = {a["index"]: a for a in traj["info"]["attempts"]}
    reason = "a module it needs is not installed: no_such_test_runner_xyz"
    for index in (1, 2):
        assert infos[index]["rank"] == [1, 0, 0]  # both unverified alike: the chooser decides, not a false pass
        assert reason in infos[index]["checks"]["could not verify"]
        assert "no file whose tests ran" in infos[index]["checks"]["regressions (clean run)"]
    assert any(line.startswith("verify: could not verify regressions of tests/test_calc.py") and reason in line
               for line in said), said  # fmt: skip
    assert sum(line.startswith("verify: attempt ") and "could not verify" in line for line in said) == 2
    assert "verify: attempt 1's patch against 1 reproduction and 1 test file" in said  # (not "1 reproductions")


def test_an_attempt_whose_checks_could_not_run_ranks_below_a_verified_one(tmp_path: Path) -> None:
    """Attempt 1 adds an import of a package that is not installed: its reproduction never reaches the code (could
    not verify, not "not resolved"); the reviewer and the chooser favour it, execution picks the verified fix."""
    broken = f"{RIGHT} && sed -i '1i import not_installed_pkg_xyz' calc.py"
    reviews = [review(9, "Fixed, and uses the helper package."), review(5, "Maybe.")]
    model = scripts(tmp_path / "scripts", [fix_script(broken, check=False), fix_script(RIGHT, check=False)], reviews,
                    [choice(1, "The first.")])  # fmt: skip
    settings = config().merged({"attempts": {"max": 2}})
    repo = make_git_repo(tmp_path / "repo", FILES)
    result, said = events_of(tmp_path, model=model, settings=settings, output_dir=tmp_path / "out", run_id="U",
                             repo=repo, variants=[Reproduction(script(REPRO))])  # fmt: skip
    assert (result.chosen, result.exit_status) == (2, "submitted")
    traj = load_trajectory(result.trajectory_path)
    assert traj["info"]["choice"]["by"] == "execution"
    infos = {a["index"]: a for a in traj["info"]["attempts"]}
    assert infos[1]["rank"][0] == 1 and infos[2]["rank"] == [0, 0, 0]
    assert (
        "reproduce.py: a module it needs is not installed: not_installed_pkg_xyz"
        in infos[1]["checks"]["could not verify"]
    )
    assert "reproductions not resolved" not in infos[1]["checks"]  # never counted as a verdict on the code
    assert any("attempt 1: could not verify" in line for line in said)


def test_a_reproduction_that_cannot_start_is_said_before_the_first_step(tmp_path: Path) -> None:
    """A given script whose interpreter is missing: its run on the original code is "could not verify" with the
    reason, a warning on the console, not "reproduced"."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    (tmp_path / "reproduce.sh").write_text("no_such_interpreter_xyz reproduce.py\n")
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = scripts(tmp_path / "scripts", [fix_script(WRONG, check=False)], [review(5, "x")])
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model.replace("{attempt}", "1")]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "C"]
    done = invoke(*args, "--reproduction", str(tmp_path / "reproduce.sh"))
    assert done.returncode == 0, done.stdout + done.stderr
    before = load_trajectory(tmp_path / "out" / "C.traj.json")["info"]["reproduction"]["scripts"][0]["before"]
    assert before["verdict"] == "could not verify" and before["reason"].startswith("it could not start (exit 127")
    assert "reproduction reproduce.sh could not verify anything: it could not start (exit 127" in done.stderr
    assert "reproduction reproduce.sh: could not verify on the original code" in done.stdout


README_SETUP = "python3 -m venv --upgrade-deps {venv} && . {venv}/bin/activate && pip install -q -e '.[dev]'"
FROM_THERE = ["tests/test_reproduction.py", "tests/test_user_python.py", "-k", "not slow"]


def checkout_copy(destination: Path) -> Path:
    """The working tree's tracked and new files (not the venv, not caches), with ../shared beside it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    shared = REPO_ROOT.parent / "shared"
    if shared.exists():
        (destination.parent / "shared").symlink_to(shared)
    return destination


@pytest.mark.slow
def test_the_suite_passes_with_the_venv_under_home_as_root_and_as_a_plain_user(tmp_path: Path) -> None:
    """The README's set-up into a venv under a temporary $HOME (as a plain user, who owns that home), then the
    execution-choice and reproduction tests from there: as that user, and as root with the same $HOME."""
    require_bwrap()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        unavailable("this test switches to a plain user: run it as root (as CI does), with setpriv")
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    outside = Path(tempfile.mkdtemp(prefix="llm-ide-test-home-"))  # pytest's folders are root's alone (0700)
    try:
        run_from_a_home_of_its_own(outside, user)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def run_from_a_home_of_its_own(outside: Path, user: list[str]) -> None:
    outside.chmod(0o755)
    home = outside / "home"
    home.mkdir()
    checkout = checkout_copy(home / "llm-ide")
    subprocess.run(["chown", "-R", "65534:65534", str(home)], check=True)
    venv = home / "venvs" / "llm-ide"
    keep = {name: value for name, value in os.environ.items() if name.startswith("PIP_") or name in ("PATH", "LANG")}
    environ = {**keep, "HOME": str(home), "TMPDIR": str(home / "tmp"), "CI": os.environ.get("CI", "")}
    # pip's bytecode for all 1.4 GB of packages was half the set-up's CPU (~40 s); the runs compile what they import
    environ["PIP_COMPILE"] = "0"
    (home / "tmp").mkdir()
    os.chown(home / "tmp", 65534, 65534)
    setup = subprocess.run([*user, "bash", "-c", README_SETUP.format(venv=venv)], cwd=checkout, env=environ,
                           capture_output=True, text=True, timeout=3600)  # fmt: skip
    assert setup.returncode == 0, setup.stderr[-2000:]
    active = {**environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{environ['PATH']}"}
    for who in (user, []):
        done = subprocess.run([*who, str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-x", *FROM_THERE], cwd=checkout, env=active, capture_output=True, text=True,
                              timeout=3600)  # fmt: skip
        assert done.returncode == 0, f"as {'a plain user' if who else 'root'}:\n{done.stdout[-3000:]}"
        assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]
