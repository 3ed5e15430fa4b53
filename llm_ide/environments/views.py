"""What a local run's commands see beyond the repository, found once when its environment opens (`found_views`): the
repository's git data kept outside it, `environment.readable`, the folder a checkout is shown at
(`environment.mount_at`), the folders they see empty (`hidden_paths`) and the Python environments they use."""

from __future__ import annotations

import os
import pwd
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llm_ide.environments.pythons import commands_python, python_environments
from llm_ide.errors import EnvironmentFailure, UsageError
from llm_ide.settings import bundled_yaml

# llm-ide's own git outside the sandbox, in a repository whose `.git` the commands write: none of its hooks runs, nor
# an fsmonitor command (`git status`, `ls-files`, `diff` ran one, as root on the host)
UNHOOKED = {
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "core.hooksPath",
    "GIT_CONFIG_VALUE_0": os.devnull,
    "GIT_CONFIG_KEY_1": "core.fsmonitor",
    "GIT_CONFIG_VALUE_1": "false",
}


def git_paths(repo: Path) -> list[Path]:
    """Where the repository's git data lives outside it (a linked worktree's git dir and the main one, alternates):
    shown read-only, as git in the commands needs them; and its own `.git`'s config and hooks (and its submodules'),
    read-only too: what git run later outside the sandbox (the user's, ours) would run (a hook, a filter, an fsmonitor
    command, an alias)."""
    dot, found = repo / ".git", []
    dot = Path(os.path.realpath(dot)) if dot.is_symlink() else dot  # (bwrap mounts nothing through a symlink)
    own = [dot / "config", dot / "hooks"] if dot.is_dir() else [dot]  # a file (a worktree's `gitdir: …`) read-only too
    try:
        if dot.is_file():
            line = dot.read_text(encoding="utf-8").strip()
            git_dir = Path(os.path.realpath(repo / line.removeprefix("gitdir:").strip()))
            found.append(git_dir)
            common = git_dir / "commondir"
            if common.is_file():
                git_dir = Path(os.path.realpath(git_dir / common.read_text(encoding="utf-8").strip()))
                found.append(git_dir)
        else:
            git_dir = dot
        alternates = git_dir / "objects" / "info" / "alternates"
        if alternates.is_file():
            found += [Path(os.path.realpath(git_dir / "objects" / line)) for line in alternates.read_text().split()]
        if own:
            own += [path for module in module_dirs(dot / "modules") for path in (module / "config", module / "hooks")]
            for hooks in own[1::2]:
                hooks.mkdir(exist_ok=True)  # as `git init` makes it: a folder the commands could fill otherwise
            if dot.is_dir() and "worktreeconfig" in (dot / "config").read_text(errors="replace").lower():
                (worktree := dot / "config.worktree").touch()  # read too (extensions.worktreeConfig): made, read-only
                own.append(worktree)
    except (OSError, UnicodeDecodeError):
        pass
    return [path for path in found if not path.is_relative_to(repo)] + [path for path in own if path.exists()]


def redirects(repo: Path) -> list[Path]:
    """Where no `commondir` is yet, in the git directory and its submodules' (git would read the config it names)."""
    dot = repo / ".git"
    return [found for path in [dot, *module_dirs(dot / "modules")] if not (found := path / "commondir").exists()]


def module_dirs(folder: Path) -> list[Path]:
    """The git dirs of the submodules under `folder` (a git dir's `modules`; a name may hold slashes), nested too."""
    found: list[Path] = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            found += [entry, *module_dirs(entry / "modules")] if (entry / "HEAD").is_file() else module_dirs(entry)
    return found


def readable_paths(entries: list[str] | None) -> list[Path]:
    """`environment.readable` as absolute paths (`~` expanded); None: the bundled config's."""
    if entries is None:
        entries = bundled_yaml("default.yaml")["environment"]["readable"]
    return [Path(os.path.realpath(Path(entry).expanduser())) for entry in entries]


def absent(path: str) -> str | None:
    """What keeps `path` (`~` its user's home) from being shown to the commands: not there, or not to be looked up
    (a name too long; as a user, a folder of another's on the way); None: it is there."""
    try:
        return None if Path(path).expanduser().exists() else f"{path}: no such file or folder"
    except OSError as error:
        return f"{path}: cannot be reached ({error.strerror})"


def check_mount_point(target: str) -> str:
    """A path where bwrap can show a folder: absolute, and existing or not under an existing top-level entry (bwrap
    cannot make a folder in the read-only root's existing entries)."""
    path = Path(target)
    top = Path("/", *path.parts[1:2])
    if not path.is_absolute() or path == top.parent or (not path.exists() and path != top and top.exists()):
        raise ValueError(f"{target}: a mount point must be an absolute path that exists or whose top folder does not")
    return str(path)


def mount_points(bwrap: str | None, mount_at: str | None, repo: Path) -> dict[str, Path]:
    """`environment.mount_at`: {where the commands see the repository: the repository} (bwrap only)."""
    if mount_at is None:
        return {}
    if bwrap is None:
        raise EnvironmentFailure(f"environment.mount_at ({mount_at}) needs bubblewrap (sandbox: bwrap, installed)")
    try:
        return {check_mount_point(mount_at): repo}
    except ValueError as error:
        raise EnvironmentFailure(f"environment.mount_at: {error}") from None


def hidden_paths(homes: list[Path] | None = None) -> list[Path]:
    """What a sandboxed command sees empty: the user's home (and `homes`: another user's whose commands these are),
    the user's runtime directory (keyrings, agent sockets) and ssh-agent's socket folders in the temp directory."""
    found = [Path.home(), *(homes or []), Path(f"/run/user/{os.getuid()}"), *Path(tempfile.gettempdir()).glob("ssh-*")]
    real = {Path(os.path.realpath(path)) for path in found if path.is_dir()}
    return sorted((path for path in real if path != Path("/")), key=lambda path: len(path.parts))


def home_of(uid: int) -> list[Path]:
    try:
        return [Path(pwd.getpwuid(uid).pw_dir)]
    except KeyError:
        return []


@dataclass
class Views:
    """What a local environment's commands write, read, see empty (`hidden`; those in `homes` shown as the run's
    home) and never see (`secluded`, the run's own folders; `own_paths`, those inside the repository), and `notes`
    (which Python they use)."""

    writable: list[Path]
    readable: list[Path]
    hidden: list[Path]
    homes: set[Path]
    secluded: list[Path]
    own_paths: list[str]
    notes: list[str]


def found_views(
    repo: Path,
    environ: dict[str, str],
    shared: list[Path],
    asked: tuple[list[str], list[str] | None],
    secluded: list[Path],
    owner: tuple[int, int] | None,
    *,
    sandboxed: bool,
) -> Views:
    """The views of `repo`'s commands: our folders they write (`shared`), `environment.writable` and `.readable`
    (`asked`; readable None: the bundled config's), the homes of the users they may be (`owner`: the repository's,
    whose they are), and the Python they use."""
    writable, readable = asked
    dot = repo / ".git"
    mounted = [dot] if dot.is_dir() and not dot.is_symlink() else []  # a mount point: no command renames it
    written = [repo, *mounted, *shared, *readable_paths(writable)]
    shown = [*readable_paths(readable), *git_paths(repo)]
    homes = [Path.home(), *home_of(os.getuid()), *(home_of(owner[0]) if owner else [])]  # $HOME, passwd's
    hidden = hidden_paths(homes[1:])
    pythons = python_environments(repo, environ, hidden if sandboxed else [])
    shown += [path for path in pythons.shown if path not in shown]
    notes = [pythons.line(commands_python(repo, environ))]
    ours = [Path(path).resolve() for path in secluded]
    if repo in ours:  # refused before a run starts (workspace/lifecycle.py): a caller of ours
        raise UsageError(f"the output folder is the repository itself ({repo})")
    inside = [str(path.relative_to(repo)) for path in ours if path.is_relative_to(repo)]
    real_homes = {Path(os.path.realpath(home)) for home in homes}  # shown as the run's home, the rest empty
    return Views(written, shown, hidden, real_homes, ours, inside, notes)
