from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from in_process import invoke

from llm_ide.tools.config import TOOLS_DIR
from llm_ide.tools.plan import BUILDS_WITHOUT_INDEX

REPO_ROOT = Path(__file__).resolve().parents[1]
VERSION_CHECK = (
    """'import sys; have = ".".join(map(str, sys.version_info[:2])); print("Python", sys.version.split()[0]);"""
    """ sys.exit(0 if have == "3.11" else "Python " + have + " found, 3.11 wanted")'"""
)
BUILDS = f"'{BUILDS_WITHOUT_INDEX}'"  # the environment's setuptools builds an editable wheel without an index
IMPORTING = (  # the same question answered by importing setuptools, as it was
    'import importlib.util, setuptools; version = tuple(int(part) for part in setuptools.__version__.split(".")[:2]);'
    ' raise SystemExit(0 if version >= (70, 1) or importlib.util.find_spec("wheel") else 1)'
)


def llm_ide(*args: str, cwd: Path = REPO_ROOT) -> tuple[str, str, int]:
    done = invoke("tools", *args, cwd=cwd)
    return done.stdout, done.stderr, done.returncode


def test_tools_list() -> None:
    out, err, status = llm_ide("list")
    assert (err, status) == ("", 0)
    rows = [line.split(None, 4) for line in out.splitlines()]
    assert rows == [
        ["NAME", "VERSION", "SOURCE", "PYTHON", "USAGE"],
        [
            "debugger",
            "0.1.0",
            "llm_ide/tools/packages/debugger",
            "-",
            "A live pdb session you drive command by command: the program keeps its state between your calls.",
        ],
        [
            "navigator",
            "0.1.0",
            "llm_ide/tools/packages/navigator",
            "3.11",
            "Code navigation (jedi), run from the repository root; every location prints as `path:line: code`.",
        ],
    ]
    assert out.splitlines()[1].index("0.1.0") == out.splitlines()[0].index("VERSION"), "columns are aligned"


def test_tools_plan_docker_and_local() -> None:
    source = TOOLS_DIR / "packages"
    pip_env = (
        "export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore PIP_PROGRESS_BAR=off"
        " PIP_NO_WARN_CONFLICTS=0"
    )
    out, _, status = llm_ide("plan", "debugger")
    assert status == 0
    venv = "/tools/envs/debugger"
    assert out.splitlines() == [
        "rm -rf /tools/debugger && mkdir -p /tools",
        f"copy {source}/debugger -> /tools/debugger",
        f"python3 -m venv --clear --without-pip --system-site-packages {venv}",
        f"{venv}/bin/python -m pip --version || {{ {venv}/bin/python -m ensurepip --default-pip"
        f" && {venv}/bin/python -m pip --version; }}",
        f"cd /tools/debugger && {pip_env} && if {venv}/bin/python -c {BUILDS} >/dev/null 2>&1;"
        f" then {venv}/bin/python -m pip install --no-build-isolation -e . || {venv}/bin/python -m pip install -e .;"
        f" else {venv}/bin/python -m pip install -e .; fi",
        f"mkdir -p /usr/local/bin && for f in {venv}/bin/*; do case ${{f##*/}} in"
        ' python*|pip*|activate*|Activate*|easy_install*) ;; *) ln -sf "$f" /usr/local/bin/ ;; esac; done',
        "command -v debugger || { echo 'debugger: not found after installation'; false; }",
        "debugger --help > /dev/null && command -v debugger-commands > /dev/null",
    ]
    out, _, status = llm_ide("plan", "navigator", "--environment", "local", "--tools-root", "/run/tools")
    python = "/run/tools/envs/navigator/bin/python"
    assert status == 0
    assert out.splitlines() == [
        "rm -rf /run/tools/navigator && mkdir -p /run/tools",
        f"copy {source}/navigator -> /run/tools/navigator",
        'PY=""; for candidate in python3.11 python3; do if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c'
        f' {VERSION_CHECK} >/dev/null 2>&1; then PY="$candidate"; break; fi; done; [ -n "$PY" ] || {{ echo "no working'
        ' Python 3.11 interpreter found (tried python3.11, python3)"; false; } && "$PY" -m venv --clear'
        " /run/tools/envs/navigator",
        f"{python} -c {VERSION_CHECK} && {python} -m pip --version",
        f"cd /run/tools/navigator && {pip_env} && if {python} -c {BUILDS} >/dev/null 2>&1;"
        f" then {python} -m pip install --no-build-isolation -e . || {python} -m pip install -e .;"
        f" else {python} -m pip install -e .; fi",
        "command -v /run/tools/envs/navigator/bin/navigator || { echo '/run/tools/envs/navigator/bin/navigator: not"
        " found after installation'; false; }",
        "/run/tools/envs/navigator/bin/navigator --help > /dev/null",
    ]


def test_tools_plan_local_keeps_plain_tools_out_of_the_users_python() -> None:
    out, _, status = llm_ide("plan", "debugger", "-e", "local")
    python = "$TOOLS_ROOT/envs/debugger/bin/python"
    assert status == 0
    assert out.splitlines()[2:4] == [
        "python3 -m venv --clear --without-pip --system-site-packages $TOOLS_ROOT/envs/debugger",
        f"{python} -m pip --version || {{ {python} -m ensurepip --default-pip && {python} -m pip --version; }}",
    ]
    assert out.splitlines()[-1] == (
        "$TOOLS_ROOT/envs/debugger/bin/debugger --help > /dev/null"
        " && command -v $TOOLS_ROOT/envs/debugger/bin/debugger-commands > /dev/null"
    )
    assert "PIP_BREAK_SYSTEM_PACKAGES" not in out


def test_tools_plan_with_conda_and_without_source(tmp_path: Path) -> None:
    config = {
        "tool_name": "ruff",
        "version": "0.6.9",
        "source": None,
        "py_standalone": "3.12",
        "installation": "pip",
        "setup_script": "cd {{ workdir }} && {{ invocation }} --version",
        "check_script": "{{ invocation }} --help > /dev/null",
        "executable": "ruff check",
        "usage": "`{{ invocation }} PATH` lints.",
    }
    (tmp_path / "ruff.yaml").write_text(yaml.safe_dump(config))
    out, _, status = llm_ide("plan", str(tmp_path / "ruff.yaml"), "--conda")
    check = VERSION_CHECK.replace("3.11", "3.12")
    assert status == 0
    assert out.splitlines() == [
        "conda create -n ruff python=3.12 -y",
        f"conda run -n ruff python -c {check} && conda run -n ruff python -m pip --version",
        "export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore PIP_PROGRESS_BAR=off"
        " PIP_NO_WARN_CONFLICTS=0 && conda run -n ruff python -m pip install ruff==0.6.9",
        "conda run -n ruff sh -c 'command -v ruff'",
        "conda run -n ruff ruff check --help > /dev/null",
        "cd /testbed && conda run -n ruff ruff check --version",
    ]


def test_tools_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("tool_name: bad\ninstallation: apt\n")
    out, err, status = llm_ide("plan", str(tmp_path / "bad.yaml"))
    assert (out, status) == ("", 2)
    assert err == (
        f"error: {tmp_path / 'bad.yaml'}: missing key `version`; missing key `source`; missing key `py_standalone`;"
        " key `installation`: unsupported value 'apt' (supported: pip); missing key `setup_script`;"
        " missing key `executable`; missing key `usage`\n"
    )
    assert llm_ide("plan", "nope")[1:] == (
        f"error: unknown tool 'nope': {TOOLS_DIR / 'nope.yaml'} not found (available: debugger, navigator)\n",
        2,
    )
    assert llm_ide("plan", "debugger", "-e", "kubernetes")[1:] == (
        "error: --environment must be docker or local, not 'kubernetes'\n",
        2,
    )
    out, err, status = llm_ide("list", "--tools-dir", str(tmp_path))
    assert (out, status) == ("", 2) and err.startswith(f"error: {tmp_path / 'bad.yaml'}: ")
    (tmp_path / "bad.yaml").write_text("tool_name: [bad\n")  # YAML's own message spans lines, a caret on one
    out, err, status = llm_ide("plan", str(tmp_path / "bad.yaml"))
    assert (out, status, err.count("\n")) == ("", 2, 1)
    assert err.startswith(f"error: {tmp_path / 'bad.yaml'}: not valid YAML: while parsing a flow sequence in ")


@pytest.mark.parametrize(
    ("version", "infos", "wheel", "builds"),
    [
        ("84.2.1", ["setuptools-84.2.1.dist-info"], False, True),
        ("70.1.0", ["setuptools-70.1.0.dist-info"], False, True),
        ("65.5.0", ["setuptools-65.5.0.dist-info"], False, False),
        ("65.5.0", ["setuptools-65.5.0.dist-info"], True, True),
        ("59.6.0", ["setuptools-59.6.0.egg-info"], False, False),  # a distribution's package (Debian)
        ("84.2.1", ["setuptools-65.5.0.dist-info", "setuptools-84.2.1.dist-info"], False, True),  # a stale one left
        ("65.5.0", ["setuptools-65.5.0.dist-info", "setuptools-84.2.1.dist-info"], False, False),
        ("70.1.0", [], False, True),
        (None, [], False, False),
    ],
)
def test_whether_setuptools_builds_without_an_index_is_told_as_importing_it_tells(
    tmp_path: Path, version: str | None, infos: list[str], wheel: bool, builds: bool
) -> None:
    """The probe reads setuptools' version from its one `-info` folder (no import: 0.1 s of CPU), else imports it:
    its answer is the import's in every layout."""
    site, imported = tmp_path / "site", tmp_path / "imported"
    if version is not None:
        (site / "setuptools").mkdir(parents=True)
        (site / "setuptools" / "__init__.py").write_text(f"open({str(imported)!r}, 'w')\n__version__ = {version!r}\n")
    for info in infos:
        (site / info).mkdir(parents=True)
    if wheel:
        (site / "wheel").mkdir(parents=True)
        (site / "wheel" / "__init__.py").touch()
    answers = []
    for probe in (BUILDS_WITHOUT_INDEX, IMPORTING):
        imported.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-S", "-c", probe], env={"PYTHONPATH": str(site)}, capture_output=True)
        answers.append((done.returncode == 0, imported.exists()))
    assert answers == [(builds, version is not None and len(infos) != 1), (builds, version is not None)]
