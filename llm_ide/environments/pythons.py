"""The Python environment the user works in, shown read-only to the sandboxed commands wherever it lives (a venv under
the hidden home directory included): the active virtualenv ($VIRTUAL_ENV) or conda environment ($CONDA_PREFIX), the
interpreters `python3` and `python` on the commands' PATH, the environment the repository's own tooling names
(Poetry's, Pipenv's, uv's $UV_PROJECT_ENVIRONMENT, pyenv-virtualenv's `.python-version`; a `.venv` inside the
repository shows anyway), and llm-ide's own (where a user keeps llm-ide, the project's dependencies often are too).
Each is asked for its prefixes and import path (its base interpreter, a `.pth` path, an editable install's project
folder come with it). A path that would show a credential folder (~/.ssh, ~/.aws, …) or the home directory itself is
never shown."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from llm_ide.environments.processes import keyring_spawner, kill_group

CREDENTIALS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".gnupg",
    ".local/share/keyrings",
    ".password-store",
    ".pypirc",
)
PROBE = (
    "import json, sys, platform; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
    "sys.base_exec_prefix, [p for p in sys.path if p], platform.python_version()]))"
)
PROBE_TIMEOUT = 20.0


@dataclass(frozen=True)
class Interpreter:
    """What a Python interpreter reports: its prefixes, its import path and its version."""

    executable: str
    prefix: str
    paths: tuple[str, ...]
    version: str


@dataclass
class PythonEnvironments:
    """The user's Python environments found for a run: (what names it, its interpreter) each, and what is shown."""

    found: list[tuple[str, Interpreter]] = field(default_factory=list)
    shown: list[Path] = field(default_factory=list)

    def line(self, commands_python: Interpreter | None) -> str:
        """What the run's start says: the Python the commands use, and what is shown of the user's."""
        if commands_python is None:
            return "the commands have no python3 on their PATH"
        names = [name for name, found in self.found if found.prefix == commands_python.prefix]
        where = f" ({names[0]})" if names else ""
        line = f"the commands use Python {commands_python.version} at {commands_python.executable}{where}"
        return line + (f"; shown read-only: {', '.join(map(str, self.shown))}" if self.shown else "")


def probe(executable: str, path_variable: str, cwd: str) -> Interpreter | None:
    """The interpreter at `executable`, asked once per process for each PATH and home folder, and for each folder `cwd`
    when it is a script (a version manager's shim, e.g. pyenv's, reads the `.python-version` there): a binary answers
    the same wherever it runs; None when it does not answer as Python does."""
    return asked(executable, path_variable, str(Path.home()), cwd if is_script(executable) else "/")


def is_script(executable: str) -> bool:
    try:
        with open(executable, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return True


@lru_cache(maxsize=64)
def asked(executable: str, path_variable: str, home: str, cwd: str) -> Interpreter | None:
    try:
        output = probe_output([executable, "-c", PROBE], probe_env(path_variable, home), cwd)
        prefix, base, exec_prefix, base_exec, paths, version = json.loads(output.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, TypeError):
        return None
    return Interpreter(executable, prefix, (prefix, base, exec_prefix, base_exec, *paths), version)


def probe_env(path_variable: str, home: str) -> dict[str, str]:
    """What a probe of an interpreter runs with: the PATH it was found on, a fixed locale, the home."""
    return {"PATH": path_variable, "LC_ALL": "C.UTF-8", "HOME": home}


def probe_output(argv: list[str], env: dict[str, str], cwd: str) -> str:
    """What `argv` prints, run in a session of its own: timed out or interrupted, what it started (a shim's
    interpreter) is killed with it. Started by the commands' thread: an interruption (a signal's handler runs on the
    main thread) then never lands inside `Popen()`, where the process is running but nothing knows it."""

    def start() -> subprocess.Popen[bytes]:
        output, silent = subprocess.PIPE, subprocess.DEVNULL
        return subprocess.Popen(argv, stdout=output, stderr=silent, env=env, cwd=cwd, start_new_session=True)

    with keyring_spawner(os.getpid()).start(start) as process:
        try:
            return process.communicate(timeout=PROBE_TIMEOUT)[0].decode()
        except BaseException:
            kill_group(process.pid)
            raise


def interpreter_in(prefix: Path) -> Path | None:
    for name in ("bin/python3", "bin/python"):
        if (prefix / name).exists():
            return prefix / name
    return None


def poetry_environments(repo: Path, environ: dict[str, str]) -> list[Path]:
    """Poetry's environments of the repository: `<name>-<hash of its path>-py*` in Poetry's virtualenvs folder."""
    try:
        project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    name = (project.get("tool", {}).get("poetry", {}) or {}).get("name") or project.get("project", {}).get("name")
    if not isinstance(name, str) or not name:
        return []
    cache = (
        environ.get("POETRY_CACHE_DIR") or Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pypoetry"
    )
    folder = Path(environ.get("POETRY_VIRTUALENVS_PATH") or Path(cache) / "virtualenvs")
    sanitized = re.sub(r'[ $`!*@"\\\r\n\t]', "_", name.lower())[:42]
    digest = hashlib.sha256(os.path.normcase(os.path.realpath(repo)).encode()).digest()
    return sorted(folder.glob(f"{sanitized}-{base64.urlsafe_b64encode(digest).decode()[:8]}-py*"))


def pipenv_environments(repo: Path, environ: dict[str, str]) -> list[Path]:
    """Pipenv's environment of the repository: the one in its virtualenvs folder whose `.project` names it."""
    if not (repo / "Pipfile").is_file():
        return []
    folder = Path(environ.get("WORKON_HOME") or Path.home() / ".local" / "share" / "virtualenvs")
    found = []
    for candidate in folder.glob("*"):
        try:
            if Path((candidate / ".project").read_text(encoding="utf-8").strip()).resolve() == repo:
                found.append(candidate)
        except OSError:
            continue
    return found


def tooling_environments(repo: Path, environ: dict[str, str]) -> list[tuple[str, Path]]:
    """(what names it, its prefix) of the environments the repository's tooling and the environment point at."""
    variables = {
        "the active virtualenv": "VIRTUAL_ENV",
        "the active conda environment": "CONDA_PREFIX",
        "uv's project environment": "UV_PROJECT_ENVIRONMENT",
    }
    named = [(label, Path(environ[name])) for label, name in variables.items() if environ.get(name)]
    named += [("Poetry's environment", path) for path in poetry_environments(repo, environ)]
    named += [("Pipenv's environment", path) for path in pipenv_environments(repo, environ)]
    version_file = repo / ".python-version"
    if version_file.is_file():
        root = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
        for name in version_file.read_text(encoding="utf-8", errors="replace").split():
            named.append(("pyenv's .python-version", root / "versions" / name))
    return [(label, Path(os.path.realpath(path.expanduser()))) for label, path in named if path.expanduser().is_dir()]


def editable_projects(paths: tuple[str, ...]) -> list[str]:
    """The project folders of editable installs in these site-packages (their direct_url.json)."""
    found = []
    for folder in paths:
        if not folder.endswith("-packages"):
            continue
        for record in direct_urls(folder):
            try:
                data = json.loads(Path(record).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and (data.get("dir_info") or {}).get("editable") and data.get("url"):
                url = urlparse(str(data["url"]))
                if url.scheme == "file":
                    found.append(unquote(url.path))
    return found


def direct_urls(folder: str) -> list[str]:
    """The `*.dist-info/direct_url.json` files in `folder`, in a glob's order: a listing and a stat per dist-info (a
    glob's selectors cost three times as much, ~5 ms a run for a few hundred packages)."""
    try:
        with os.scandir(folder) as entries:
            found = [
                os.path.join(entry.path, "direct_url.json") for entry in entries if entry.name.endswith(".dist-info")
            ]
    except OSError:
        return []
    return [path for path in found if os.path.isfile(path)]


def safe_to_show(path: Path, hidden: list[Path]) -> bool:
    """A path worth showing (under a hidden folder) that shows no credential folder and not a whole home."""
    if not any(path.is_relative_to(folder) for folder in hidden) or any(
        folder.is_relative_to(path) for folder in hidden
    ):
        return False
    for home in {Path.home(), *hidden}:
        for name in CREDENTIALS:
            credential = home / name
            if path.is_relative_to(credential) or (credential.exists() and credential.is_relative_to(path)):
                return False
    return True


def python_environments(repo: Path, environ: dict[str, str], hidden: list[Path]) -> PythonEnvironments:
    """The user's Python environments for a run in `repo` whose commands get `environ`, and what of them to show."""
    path_variable = environ.get("PATH", os.defpath)
    interpreters = []
    for label, prefix in tooling_environments(repo, environ):
        if (executable := interpreter_in(prefix)) is not None:
            interpreters.append((label, str(executable)))
    for name in ("python3", "python"):
        if found := shutil.which(name, path=path_variable):
            interpreters.append((f"{name} on PATH", found))
    interpreters.append(("llm-ide's own environment", sys.executable))  # where a user keeps llm-ide, the project too
    result, seen, scanned = PythonEnvironments(), set(), set()
    for label, executable in interpreters:
        if os.path.realpath(executable) in seen:
            continue
        seen.add(os.path.realpath(executable))
        interpreter = probe(executable, path_variable, str(repo))
        if interpreter is None:
            continue
        result.found.append((label, interpreter))
        folders = tuple(dict.fromkeys(path for path in interpreter.paths if path not in scanned))  # each read once
        scanned.update(folders)
        for entry in [*interpreter.paths, *editable_projects(folders), str(Path(executable).parent.parent)]:
            real = Path(os.path.realpath(entry))
            if real.is_dir() and real not in result.shown and safe_to_show(real, hidden):
                result.shown.append(real)
    result.shown = [
        path for path in result.shown if not any(path != o and path.is_relative_to(o) for o in result.shown)
    ]
    return result


def commands_python(repo: Path, environ: dict[str, str]) -> Interpreter | None:
    """The Python the commands get by `python3` on their PATH."""
    path_variable = environ.get("PATH", os.defpath)
    found = shutil.which("python3", path=path_variable) or shutil.which("python", path=path_variable)
    return probe(found, path_variable, str(repo)) if found else None
