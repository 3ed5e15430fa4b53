"""The run's patch: the working tree against the base commit, whose objects are kept in a git directory of our own
outside the repository (a deleted or rewritten `.git` keeps the patch), at any number of files."""

from __future__ import annotations

import shlex
import uuid
import weakref
from collections.abc import Callable
from fnmatch import fnmatch
from typing import Any

from llm_ide.environments.base import Environment, EnvironmentFailure
from llm_ide.errors import RepositoryLost
from llm_ide.secrets import redact
from llm_ide.settings import CoreSettings, PatchSettings
from llm_ide.workspace.binary import GLOB, as_binary, not_utf8

MISSING = 86  # exit status of an extraction that finds the private base directory gone or broken
LOST = 87  # ... that finds the repository's own git directory gone, another one, or without the base commit
PLAIN = "--no-renames --no-color --no-ext-diff --no-textconv --src-prefix=a/ --dst-prefix=b/ -U3 --submodule=short"
PLAIN += " --ignore-submodules=none"  # whatever a config says (diff.noprefix, .context, .submodule, color.ui…)
# bash on the staged diff's -z records (raw, numstat) up to its patch: numstat passed on, new paths kept, `linked` set
SPLIT = """added=() linked=; while IFS= read -r -d '' f; do case $f in '') break;; :160000*|:*' 160000 '*) linked=1;;&
 :*' A') IFS= read -r -d '' p; added+=("$p");; :*) IFS= read -r -d '' p;; *) printf '%s\\0' "$f";; esac; done"""
SIZES = """if a="${added[*]}"; [ ${#a} -lt 32768 ]; then [ -z "$a" ] || stat --printf '%s %n\\0' -- "${added[@]}" ||\
 (exit 123); else printf '%s\\0' "${added[@]}" | xargs -0 stat --printf '%s %n\\0' --; fi"""  # xargs: a long list
# `add -A .`, gitlinks as unchanged (git would run in each, under a config a command wrote), then their commits alone
# (`update-index` reads a HEAD, runs no git in it); a repository without a commit left out, the staging not failed;
ADD = (  # the gitlinks listed only once the base or a staging had one (`seen`): a loop over an index costs an add
    "{{ [ -f {seen} ] && {git} ls-files -s | grep -q '^160000 ' && {git} ls-files -s -z | while IFS= read -r -d '' e;"
    " do case $e in '160000 '*) printf '%s\\0' \"${{e#*$'\\t'}}\";; esac; done > {links} || : > {links}; }}"
    " && {{ ! [ -s {links} ] || {git} update-index -z --assume-unchanged --stdin < {links}; }}"
    " && {{ {git} add -A --ignore-errors . 2> {links}.errors || ! grep -v 'does not have a commit checked out'"
    " {links}.errors | grep -e ^error -e ^fatal >&2; }} && {{ ! [ -s {links} ] || {{ {git} update-index -z"
    " --no-assume-unchanged --stdin < {links} && {git} update-index -z --remove --stdin < {links}; }}; }}"
)


class PatchError(RuntimeError): ...


def ignore_pattern(path: str) -> str:
    """The .gitignore line that matches folder `path` (relative to the repository) and nothing else."""
    return "/" + GLOB.sub(lambda found: "\\" + found.group(), path) + "/"


def is_artefact(path: str, patterns: list[str]) -> bool:
    return any(fnmatch(part, pattern) or fnmatch(path, pattern) for pattern in patterns for part in path.split("/"))


class BaseTree:
    """The base commit (its tree and blobs, packed) copied out of the repository when the run starts: into a
    directory the agent's commands cannot write (local: a host directory the sandbox does not show; docker: a
    directory of the container, restored from the host's copy of the pack whenever it is damaged)."""

    def __init__(self, env: Environment, base: str) -> None:
        self.env, self.base = env, base
        listing = f"git rev-list --objects --no-walk {shlex.quote(base)} | git pack-objects --window=0 --stdout"
        returncode, output = env.run_trusted(f"git rev-parse --absolute-git-dir && {listing}", 600)  # a line, the pack
        repository, _, self.pack = output.partition(b"\n")
        if returncode != 0 or not self.pack.startswith(b"PACK"):
            raise PatchError(f"cannot read the base commit {base[:12]} from the repository")
        self.git_dir = env.private_dir(f"base-{uuid.uuid4().hex[:12]}.git")
        self.repository = repository.decode(errors="replace")
        self._install()

    def _install(self) -> None:
        d, self.excluded = shlex.quote(self.git_dir), set[str]()  # left out of the index by the last staging
        self.env.put_private(f"{self.git_dir}/base.pack", self.pack)
        script = (  # (an empty template: no hook samples copied); the config git makes is kept (the first install's)
            f"git init -q --bare --template= {d} && mkdir -p {d}/info && git --git-dir={d} index-pack --stdin"
            f" < {d}/base.pack >/dev/null && rm -f {d}/base.pack {d}/index && {{ ! git --git-dir={d} ls-tree -r"
            f" {shlex.quote(self.base)} | grep -q '^160000 ' || : > {d}/gitlinks.seen; }} && cat {d}/config"
        )
        made = self.script(script, "cannot store the base commit", "").decode()
        self.config: str = getattr(self, "config", made)  # a reinstall keeps the first (its config may be a command's)

    def _own(self) -> str:
        """Builtins writing anew what git reads in our directory (the commands, root in a container, can write it)."""
        d = shlex.quote(self.git_dir)
        exclude = shlex.quote("".join(ignore_pattern(path) + "\n" for path in self.env.own_paths))  # the run's folder
        writes = f"printf %s {shlex.quote(self.config)} >{d}/config && printf %s {exclude} >{d}/info/exclude"
        return f"{{ {writes} && : >{d}/info/attributes; }} 2>/dev/null || exit {MISSING}; "

    def git(self, index: str = "index") -> str:
        git_dir = shlex.quote(self.git_dir)
        return f"GIT_DIR={git_dir} GIT_INDEX_FILE={git_dir}/{index} GIT_WORK_TREE=. GIT_LITERAL_PATHSPECS=1 git"

    def run_git(self, command: str, index: str = "index", write: str = "") -> bytes:
        return self.script(f"{write}{self.git(index)} -c core.quotepath=off {command}")

    def script(self, script: str, failure: str = "patch extraction failed", own: str | None = None) -> bytes:
        returncode, output = self.env.run_trusted((self._own() if own is None else own) + script, 600)
        if returncode != 0:
            raise PatchError(f"{failure} ({returncode}): {output.decode(errors='replace').strip()[:500]}")
        return output

    def staged(self, settings: PatchSettings, then: str | None, first: str = "") -> bytes:
        """The working tree staged in our index against the base (ignored, artefact, binary and oversized new files left
        as the base has them), then `then`'s output on it (None: the patch): one call (after the check `first`)."""
        base, token, git_dir = shlex.quote(self.base), uuid.uuid4().hex, shlex.quote(self.git_dir)
        git, changes = f"{self.git()} -c core.quotepath=off", f"{git_dir}/changes"
        add = ADD.format(git=git, links=f"{git_dir}/gitlinks", seen=(seen := f"{git_dir}/gitlinks.seen"))
        missing = f"{{ s=$?; {git} cat-file -e {base}^{{tree}} 2>/dev/null || exit {MISSING}; exit $s; }}"
        # the index kept between calls (made from the base the first time); `then` sees the last call's left out files
        again = f"reset -q {base} --pathspec-from-file={git_dir}/excluded --pathspec-file-nul && {git} "
        command = f"diff --cached {PLAIN} {base}" if then is None else then

        def script() -> str:  # (the files left out: the last call's, none after a new base is installed)
            rest = "cat" if then is None and not self.excluded else f"{git} {again if self.excluded else ''}{command}"
            listing = f"{PLAIN if rest == 'cat' else PLAIN.replace(' -U3', '')} -z {base} --raw --no-abbrev --numstat"
            return (
                f"{{ {{ [ -f {git_dir}/index ] || {git} read-tree {base}; }} && {add} && {git} diff --cached {listing}"
                f" > {changes} && {{ {SPLIT} && {{ [ -z $linked ] || : > {seen}; }} && echo {token} && {SIZES} && echo"
                f" {token} && {rest}; }} < {changes}; }} || {missing}"
            )

        returncode, output = self.env.run_trusted(first + self._own() + script(), 600)
        if returncode == LOST and first:
            raise RepositoryLost(
                f"the repository's git directory ({self.repository}) was deleted or replaced during the run (its base "
                f"commit {self.base[:12]} is gone from it): the patch kept is the run's last worktree snapshot"
            )
        if returncode == MISSING:
            self._install()
            returncode, output = self.env.run_trusted(self._own() + script(), 600)
        if returncode != 0:
            raise PatchError(f"patch extraction failed ({returncode}): {output.decode(errors='replace').strip()[:500]}")
        numstat, sizes, result = output.split(f"{token}\n".encode(), 2)
        excluded = {entry.split("\t", 2)[2] for entry in split_z(numstat) if entry[:4] == "-\t-\t"}  # binary
        for entry in split_z(sizes):  # each new file: its size and path
            size, _, name = entry.partition(" ")
            if is_artefact(name, settings.artefacts) or (size.isdigit() and int(size) > settings.max_new_file_bytes):
                excluded.add(name)
        if excluded == self.excluded:  # exact: `then` ran with just the files this call finds to leave out left out
            return result
        self.excluded = excluded  # other ones: staged anew, in one more call (the list a file: it may be long)
        self.env.put_private(f"{self.git_dir}/excluded", b"".join(path.encode() + b"\0" for path in sorted(excluded)))
        linked = f"{{ ! {git} ls-files -s | grep -q '^160000 ' || : > {seen}; }}"  # (no diff of this staging)
        return self.script(f"{add} && {linked} && {git} {again if excluded else ''}{command}")

    def extract(self, settings: PatchSettings, check: bool = False) -> str:
        """`git diff` of the working tree against the base, new files included; files matched by .gitignore,
        build artefacts, binary files and oversized new files left out. The repository's `.git` is not used; with
        `check`, RepositoryLost first (in the same call) when it is gone, another one, or without the base commit."""
        found = f"git rev-parse --absolute-git-dir --verify -q {shlex.quote(self.base)}^{{commit}} 2>/dev/null"
        line = shlex.quote(self.repository + "\n")  # its git directory, then (the commit found) the commit's id
        first = f'case "$({found})" in {line}*) ;; *) exit {LOST};; esac; '
        diff = self.staged(settings, None, first if check else "")
        if "\ufffd" in (text := diff.decode("utf-8", errors="replace")) and (paths := not_utf8(diff)):  # binary.py
            diff = self.run_git(f"diff --cached --binary {PLAIN} {self.base}", write=as_binary(self.git_dir, paths))
            return diff.decode("utf-8", errors="replace")  # (their bytes lost as text: binary patches)
        return text


def split_z(output: bytes) -> list[str]:
    return [entry for entry in output.decode("utf-8", errors="surrogateescape").split("\0") if entry]


_TREES: weakref.WeakKeyDictionary[Any, BaseTree] = weakref.WeakKeyDictionary()


def keep_base(env: Environment, base: str) -> BaseTree:
    """Copies the base commit out of the repository (once per environment): call it before the agent's first step."""
    if (tree := _TREES.get(env)) is None or tree.base != base:
        try:
            tree = _TREES[env] = BaseTree(env, base)
        except PatchError as error:
            raise EnvironmentFailure(str(error)) from None
    return tree


def extract_patch(env: Environment, base: str, settings: PatchSettings, check: bool = False) -> str:
    return keep_base(env, base).extract(settings, check)


def snapshotter(env: Environment, base: str, settings: CoreSettings) -> Callable[[], str]:
    """The worktree's snapshot (its diff against the base), as the checkpoint keeps it: a secret the agent wrote into a
    file is masked there too (and in a worktree put back from it). A failure ends the run (`error`)."""

    def snapshot() -> str:
        try:
            return redact(extract_patch(env, base, settings.patch, check=True))
        except EnvironmentFailure:
            raise
        except Exception as error:
            raise PatchError(f"patch extraction failed: {error}") from None

    return snapshot
