"""What a run's patch cannot hold: changes inside a git submodule (its files are its own repository's; the patch is
this repository's working tree against its base commit). Said at the end of a run, not dropped without a word (a
container's copy, and its submodules' changes with it, is gone once the run ends)."""

from __future__ import annotations

import logging

from llm_ide.environments.base import Environment

said = logging.getLogger("llm_ide.environment")  # its warnings are shown on the console as they happen
CHECK_SECONDS = 60


def changed_submodules(env: Environment) -> list[tuple[str, bool]] | None:
    """The submodules whose files differ from their commit or hold new files (`git status` v2: `S.M.`, `S..U`), each
    with whether it is new to the index (a repository the commands made and staged); None when `git status` did not
    end in time. Asked where the commands run: git runs in each submodule under its own config, which a command may
    have written (a clean filter in it; its fsmonitor command is left out, `-c` reaching the submodules' git too)."""
    status = "git -c core.quotepath=off -c core.fsmonitor=false status --porcelain=v2 --ignore-submodules=none"
    found = env.execute(f"{status} | grep -a '^1 .. S' || true", CHECK_SECONDS)  # only their lines: output is capped
    if found.timed_out:
        return None
    if found.returncode != 0:
        return []
    entries = [line.split(" ", 8) for line in found.output.splitlines() if line.startswith("1 ")]
    return [
        (e[8], e[1][0] == "A")
        for e in entries
        if len(e) == 9 and e[2][0] == "S" and (e[2][2:] != ".." or e[1][0] == "A")
    ]


def warn_submodules(env: Environment) -> None:
    found = changed_submodules(env)
    if found is None:
        said.warning(
            "whether files inside git submodules changed (they would not be in the patch) is not known: `git status` "
            "did not end within %d s (a filter in a submodule's config?)",
            CHECK_SECONDS,
        )
        return
    changed, made = [path for path, new in found if not new], [path for path, new in found if new]
    if changed:
        said.warning(
            "changes inside the git submodule%s %s are not in the patch (a submodule's files belong to its own "
            "repository): commit them there, or move the files into this repository",
            "s" * (len(changed) > 1),
            ", ".join(changed),
        )
    if made:
        said.warning(
            "git repositories in the worktree are staged as submodules since the last commit (%s): a config a command "
            "wrote there runs (a filter) when git runs in them, or `git status` here while they stay staged; remove "
            "them before you do (git rm -r --cached PATH, then rm -rf PATH)",
            ", ".join(made),
        )
