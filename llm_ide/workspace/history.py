"""Nothing after the base commit is reachable from the agent's repository (issue 23 §1): agents score without solving
when they can read the fix from the repository's future (a later commit on a branch, a tag, a remote-tracking ref, a
reflog, a stash, an unreachable object). Before the agent's first command the check runs in the environment (any
image) and deletes what it finds: every ref whose commit is not the base or one of its ancestors, every remote and
remote-tracking ref, replace refs, notes, the stash, reflogs, pseudo-refs (FETCH_HEAD, ORIG_HEAD, …), rerere's
recorded resolutions, grafts and alternates, then the objects nothing reaches any more. Tags and branches on the
base's own history stay (`git describe` and version tools read them).

It runs where the checkout is ours: a container's copy or an image's repository, and local checkouts llm-ide made
(SWE-bench's, a replay's: the code that made it says so, `ours`; never a mark in the repository, which the agent's
commands write). A user's own repository in a local run is never rewritten (its branches are the user's work, not a
hidden answer) unless `environment.scrub_history: always`."""

from __future__ import annotations

import logging
import shlex
from typing import TypeVar

from llm_ide.environments.base import Environment, EnvironmentFailure
from llm_ide.settings import CoreSettings

Run = TypeVar("Run", bound=CoreSettings)

log = logging.getLogger("llm_ide.run")

FOUND = "@@llm-ide-found "  # the lines of the script's report
NOUNS = {  # each kind the script reports: its noun, one and many
    "remotes": ("remote", "remotes"),
    "refs": ("ref", "refs"),
    "reflog-entries": ("reflog entry", "reflog entries"),
    "pseudo-refs": ("pseudo-ref", "pseudo-refs"),
    "worktrees": ("linked worktree", "linked worktrees"),
    "alternates": ("alternates file", "alternates files"),
    "unreachable-objects": ("unreachable object", "unreachable objects"),
}

# $1: the base commit. Reports each kind of thing found on a line `@@llm-ide-found KIND COUNT [NAMES]`, deletes it,
# then checks that nothing but the base's history is left (exit 3 otherwise).
SCRUB = r"""
set -u
base=$1
report() { [ "$2" -gt 0 ] && printf '@@llm-ide-found %s %s %s\n' "$1" "$2" "$3"; return 0; }
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
git cat-file -e "$base^{commit}" 2>/dev/null || exit 0
common=$(git rev-parse --path-format=absolute --git-common-dir)
gitdir=$(git rev-parse --path-format=absolute --git-dir)
remotes=$(git remote)
report remotes "$(printf '%s' "$remotes" | grep -c .)" "$(echo $remotes)"
for remote in $remotes; do git remote remove "$remote" >/dev/null 2>&1; done
keep=$(git for-each-ref --merged="$base" --format='%(refname)' refs/heads refs/tags)
refs=$(git for-each-ref --format='%(refname)' | grep -vxF -e "$keep" -e '')
report refs "$(printf '%s' "$refs" | grep -c .)" "$(printf '%s' "$refs" | head -n 5 | tr '\n' ' ')"
printf '%s\n' "$refs" | grep . | sed 's/^/delete /' | git update-ref --no-deref --stdin
logs=$(cat "$common"/logs/HEAD "$gitdir"/logs/HEAD 2>/dev/null | wc -l)
logs=$((logs + $(find "$common/logs" "$gitdir/logs" -path '*/refs/*' -type f -exec cat {} + 2>/dev/null | wc -l)))
report reflog-entries "$logs" ""
git reflog expire --expire=now --expire-unreachable=now --all >/dev/null 2>&1
rm -rf "$common/logs" "$gitdir/logs"
pseudo=""
for dir in "$common" "$gitdir"; do
  for name in FETCH_HEAD ORIG_HEAD MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD BISECT_HEAD AUTO_MERGE \
              rebase-merge rebase-apply sequencer rr-cache info/grafts shallow-lock; do
    [ -e "$dir/$name" ] && pseudo="$pseudo $name" && rm -rf "${dir:?}/$name"
  done
done
report pseudo-refs "$(echo $pseudo | wc -w)" "$pseudo"
for tree in "$common"/worktrees/*; do
  [ -f "$tree/HEAD" ] || continue
  head=$(git rev-parse -q --verify "$(cat "$tree/HEAD" | sed 's/^ref: //')" 2>/dev/null)
  if [ -n "$head" ] && ! git merge-base --is-ancestor "$head" "$base" 2>/dev/null; then
    report worktrees 1 "$(basename "$tree")"
    rm -rf "$tree"
  fi
  rm -rf "$tree/logs"
done
alternates="$common/objects/info/alternates"
if [ -s "$alternates" ]; then
  report alternates 1 ""
  git repack -a -d -q && rm -f "$alternates"
fi
unreachable() { git fsck --unreachable --no-reflogs --connectivity-only 2>/dev/null | grep -c '^unreachable '; }
found=$(unreachable)
report unreachable-objects "$found" ""
left=0
if [ "$found" -gt 0 ]; then
  rm -f "$common"/objects/pack/*.keep "$common"/objects/pack/multi-pack-index
  rm -rf "$common"/objects/info/commit-graph "$common"/objects/info/commit-graphs
  git -c gc.auto=0 repack -a -d -q && git prune --expire=now
  left=$(unreachable)
fi
later=$(git rev-list --all --not "$base" -- 2>/dev/null | head -n 1)
[ -z "$later" ] && [ "$left" -eq 0 ] || { echo "still reachable: ${later:-$left unreachable objects}"; exit 3; }
"""


def ours(settings: Run) -> Run:
    """The settings of a run in a local checkout llm-ide made: `auto` scrubs it, as it does a container's copy."""
    if settings.environment.scrub_history != "auto":
        return settings
    return settings.merged({"environment": {"scrub_history": "always"}}, origin="llm-ide's own checkout")


def applies(env: Environment, mode: str) -> bool:
    return mode == "always" or (mode == "auto" and env.capabilities.ephemeral)


def hide_future(env: Environment, base: str, mode: str) -> str:
    """Deletes what of the repository's future the environment's checkout holds (see the module); a line saying
    what was found and removed ('' when nothing was). EnvironmentFailure when something stays reachable."""
    if not applies(env, mode):
        return ""
    returncode, output = env.run_trusted(f"bash -c {shlex.quote(SCRUB)} llm-ide-scrub {shlex.quote(base)}", 1800)
    text = output.decode("utf-8", errors="replace")
    if returncode != 0:
        detail = " ".join(text.split())[-300:]
        raise EnvironmentFailure(f"the repository's history after the base commit could not be removed: {detail}")
    found = []
    for line in text.splitlines():
        if line.startswith(FOUND):
            kind, count, *names = line.removeprefix(FOUND).split(" ", 2)
            listed = " ".join(" ".join(names).split())
            noun = NOUNS.get(kind, (kind, kind))[count != "1"]
            found.append(f"{count} {noun}" + (f" ({listed})" if listed else ""))
    if not found:
        return ""
    where = " (the container's copy; the repository given is left as it is)" * env.capabilities.ephemeral
    return f"removed what came after the base commit {base[:12]}{where}: " + ", ".join(found)
