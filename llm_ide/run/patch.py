from __future__ import annotations

import shlex
from fnmatch import fnmatch

from llm_ide.environments.base import Environment
from llm_ide.settings import PatchSettings

INDEX = ".git/llm-ide-patch-index"
DIFF = ".git/llm-ide-patch.diff"


def base_commit(env: Environment) -> str | None:
    result = env.execute("git rev-parse --verify HEAD", timeout=60)
    return result.output.strip() if result.returncode == 0 else None


def is_artefact(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    return any(fnmatch(part, pattern) or fnmatch(path, pattern) for pattern in patterns for part in parts)


def extract_patch(env: Environment, base: str, settings: PatchSettings) -> str:
    """`git diff` of the working tree against `base`, new files included; files matched by .gitignore, build
    artefacts, binary files and oversized new files left out. The repository's own index is not touched."""
    git = f"GIT_INDEX_FILE={INDEX} git -c core.quotepath=off"
    diff = f"{git} diff --cached --no-renames {shlex.quote(base)}"
    try:
        env.execute(f"rm -f {INDEX} {DIFF}", timeout=30)
        _run(env, f"{git} read-tree {shlex.quote(base)} && {git} add -A .")
        added = {line[2:] for line in _run(env, f"{diff} --name-status").splitlines() if line.startswith("A\t")}
        binary = {line[4:] for line in _run(env, f"{diff} --numstat").splitlines() if line.startswith("-\t-\t")}
        excluded = binary | {p for p in added if is_artefact(p, settings.artefacts)}
        sizes = _sizes(env, sorted(added - excluded))
        excluded |= {p for p, size in sizes.items() if size > settings.max_new_file_bytes}
        pathspec = " ".join(shlex.quote(f":(exclude,literal){p}") for p in sorted(excluded))
        _run(env, f"{diff} -- . {pathspec} > {DIFF}")
        snapshot = env.read_files([DIFF])[DIFF]
        return "" if snapshot is None else snapshot.data.decode("utf-8", errors="replace")
    finally:
        env.execute(f"rm -f {INDEX} {DIFF}", timeout=30)


def _run(env: Environment, command: str) -> str:
    result = env.execute(command, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"patch extraction failed ({result.returncode}): {result.output.strip()[:500]}")
    return result.output


def _sizes(env: Environment, paths: list[str]) -> dict[str, int]:
    if not paths:
        return {}
    output = _run(env, "stat -c '%s %n' -- " + " ".join(shlex.quote(p) for p in paths))
    sizes = {}
    for line in output.splitlines():
        size, _, name = line.partition(" ")
        if size.isdigit():
            sizes[name] = int(size)
    return sizes
