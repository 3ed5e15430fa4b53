"""What a run's patch cannot hold: changes inside a git submodule (its files are its own repository's; the patch is
this repository's working tree against its base commit). Said at the end of a run, not dropped without a word (a
container's copy, and its submodules' changes with it, is gone once the run ends)."""

from __future__ import annotations

import logging

from llm_ide.environments.base import Environment

said = logging.getLogger("llm_ide.environment")  # its warnings are shown on the console as they happen


def changed_submodules(env: Environment) -> list[str]:
    """The submodules whose files differ from their commit or hold new files (`git status` v2: `S.M.`, `S..U`). Asked
    where the commands run: git runs in each submodule under its own config, which a command may have written (a
    repository it made and staged, a clean filter in it)."""
    status = "git -c core.quotepath=off status --porcelain=v2 --ignore-submodules=none"
    found = env.execute(f"{status} | grep -a '^1 .. S' || true", 60)  # only their lines: an output is cut at its cap
    if found.returncode != 0 or found.timed_out:
        return []
    entries = [line.split(" ", 8) for line in found.output.splitlines() if line.startswith("1 ")]
    return [entry[8] for entry in entries if len(entry) == 9 and entry[2][0] == "S" and entry[2][2:] != ".."]


def warn_submodules(env: Environment) -> None:
    if found := changed_submodules(env):
        said.warning(
            "changes inside the git submodule%s %s are not in the patch (a submodule's files belong to its own "
            "repository): commit them there, or move the files into this repository",
            "s" * (len(found) > 1),
            ", ".join(found),
        )
