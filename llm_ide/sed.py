"""Whether a sed command line only reads and prints: no in-place option, no script read from a file, and no script
command or `s` flag that writes a file or runs a command (`w`, `W`, `e`, `s///w`, `s///e`). Read conservatively:
anything this reader does not follow is taken as writing."""

from __future__ import annotations

SHORT_OPTIONS = set("nErsuz")  # -n -E -r -s -u -z; `e` ends a cluster: the script follows
LONG_OPTIONS = {"--quiet", "--silent", "--regexp-extended", "--separate", "--unbuffered", "--null-data", "--posix"}
SIMPLE = set("pdqQ=lnNPDhHgGxzF{")  # commands that take no argument (q and Q an exit code)
TO_LINE_END = set("aicrR#")  # text to print, a file to read and print, a comment: the rest of the line
LABELS = set("btT:")  # a label: up to `;` or the line's end
S_FLAGS = set("gpiImM0123456789")


def only_prints(words: list[str]) -> bool:
    """`words`: the command's words, sed's name first."""
    scripts: list[str] = []
    args = iter(words[1:])
    for word in args:
        if word in ("-e", "--expression") or (word.startswith("-") and not word.startswith("--") and word[-1] == "e"):
            if not set(word[1:-1]) <= SHORT_OPTIONS and word != "--expression":
                return False
            scripts.append(next(args, ""))
        elif word.startswith("--expression="):
            scripts.append(word.split("=", 1)[1])
        elif word.startswith("--"):
            if word not in LONG_OPTIONS:
                return False  # --in-place, --file, and what is not known
        elif word.startswith("-") and word != "-":
            if not set(word[1:]) <= SHORT_OPTIONS:
                return False  # -i, -i.bak, -f FILE, -l N, …
        elif not scripts:
            scripts.append(word)  # the script; the words after it are files to read
    return bool(scripts) and all(script_prints(script) for script in scripts)


def script_prints(script: str) -> bool:
    i = 0
    while i < len(script):
        if script[i] in " \t\n;}":
            i += 1
            continue
        i = after_addresses(script, i)
        while 0 <= i < len(script) and script[i] in " \t!":
            i += 1
        if i < 0 or i >= len(script):
            return i >= 0
        command = script[i]
        if command in SIMPLE:
            i += 1
        elif command in TO_LINE_END or command in LABELS:
            ends = "\n" if command in TO_LINE_END else ";\n"
            i = next((j for j in range(i, len(script)) if script[j] in ends), len(script))
        elif command in "sy":
            i = after_delimited(script, i + 1, 2)
            if i < 0:
                return False
            if command == "s":
                flags = i
                while i < len(script) and script[i] not in " \t\n;}":
                    i += 1
                if not set(script[flags:i]) <= S_FLAGS:
                    return False  # w FILE, e, …
        else:
            return False  # w, W, e, and what is not known
    return True


def after_addresses(script: str, i: int) -> int:
    """The index after the command's address(es) (`3`, `$`, `/re/I`, `\\%re%`, `3,+2`, `1~2`); -1 if one is cut."""
    for first in (True, False):
        if not first:
            if i >= len(script) or script[i] != ",":
                return i
            i += 1
        if i < len(script) and script[i] in "+~" and not first:
            i += 1
        if i < len(script) and script[i].isdigit():
            while i < len(script) and (script[i].isdigit() or script[i] == "~"):
                i += 1
        elif i < len(script) and script[i] == "$":
            i += 1
        elif i < len(script) and script[i] in "/\\":
            start = i + 1 if script[i] == "/" else i + 2
            if start > len(script):
                return -1
            i = after_delimited(script, start - 1, 1)
            while 0 <= i < len(script) and script[i] in "IM":
                i += 1
            if i < 0:
                return -1
        elif not first:
            return -1
    return i


def after_delimited(script: str, at: int, parts: int) -> int:
    """`script[at]` is a delimiter: the index after `parts` more of it (escaped ones skipped); -1 if cut short."""
    if at >= len(script) or script[at] in "\n\\":
        return -1
    delimiter, i = script[at], at + 1
    for _ in range(parts):
        while i < len(script) and script[i] != delimiter:
            i += 2 if script[i] == "\\" else 1
        if i >= len(script):
            return -1
        i += 1
    return i
