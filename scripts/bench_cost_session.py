"""The session of `bench_session.py` with a check script, and its actions as mini-swe-agent's bash commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_session_script import act, reflect, symbols_of

from llm_ide import verdict
from llm_ide.actions import CORE_GRAMMAR
from llm_ide.parsing import parse_action

ANNOTATION = "  # reviewed: value computed here"
CHECK_SCRIPT = """import subprocess

diff = subprocess.run(["git", "diff", "-U0"], capture_output=True, text=True, check=True).stdout.splitlines()
removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
changed = [line for line in added if line.split("  # reviewed")[0] not in removed]
print(f"{len(added)} annotated lines, {len(changed)} with a code change")
raise SystemExit(1 if changed else 0)
"""
CHECK_AT = (12, 25, 45, 70, 95)  # a check script is written at the first step, run at the others


def verdict_words(reflection: str) -> str:
    """What a reflection says beside its verdict word: its summary and lessons, as one text."""
    text = reflection.split(":", 1)[1] if reflection.startswith(("good:", "bad:")) else reflection
    return " ".join(line.removeprefix("lesson:").strip() for line in text.strip().splitlines())


def with_check_script(script: list[str]) -> list[str]:
    """The session with a check script: written, then run now and then (each replacing a view-like step)."""
    script = list(script)
    acts, reflections = len(script) // 2 + 1, script[1::2]
    wanted = list(CHECK_AT)
    for step in range(2, acts):
        if not wanted or step < wanted[0]:
            continue
        kind = parse_action(script[2 * (step - 1)], CORE_GRAMMAR).action_type
        if kind in ("edit", "submit") or any(verdict.parse(r).bad for r in reflections[step - 2 : step]):
            continue
        if wanted.pop(0) == CHECK_AT[0]:
            thought = "A small script that compares the diff with the original lines checks the annotations for me."
            response, summary = act(thought, "create", path="check_annotations.py", content=CHECK_SCRIPT), "Wrote it."
        else:
            thought = "I run the check script to confirm that every annotation so far leaves the code unchanged."
            response, summary = act(thought, "bash", command="python3 check_annotations.py"), "All comment-only."
        script[2 * (step - 1)], script[2 * step - 1] = response, reflect(False, summary)
    return script


def mini_responses(repo: Path, acts: list[str], matches: int = 100, said: list[str] | None = None) -> list[str]:
    """Each llm-ide action as mini-swe-agent would do it: the same thought (after `said[i]`, what llm-ide's reply says
    before it: its verdict's words), one bash command with the same effect (a search shows as many matches as
    llm-ide's, `matches`: its `agent.search_max_results`)."""
    texts = {p.relative_to(repo).as_posix(): p.read_text() for p in repo.rglob("*.py")}
    spans = {(s.path, s.qualname): (s.start, s.end) for path, text in texts.items() for s in symbols_of(path, text)}
    responses = []
    for index, response in enumerate(acts):
        action = parse_action(response, CORE_GRAMMAR)
        kind, params = action.action_type, action.action_params
        thought = " ".join(filter(None, [(said or [""] * len(acts))[index], action.thought]))
        responses.append(
            f"THOUGHT: {thought}\n\n```mswea_bash_command\n{mini_command(kind, params, texts, spans, matches)}\n```"
        )
    return responses


def mini_command(
    kind: str, params: dict[str, Any], texts: dict[str, str], spans: dict[Any, tuple[int, int]], matches: int = 100
) -> str:
    path = params.get("path", "")
    if kind == "view":
        return f"nl -ba {path} | sed -n '{params['start_line']},{params['end_line']}p'"
    if kind == "view_symbol":
        start, end = spans[(path, params["symbol"])]
        return f"nl -ba {path} | sed -n '{start},{end}p'"
    if kind == "search":
        include = f"--include='{path}' " if path else ""
        return f"grep -rnIE --exclude-dir=.git {include}-e '{params['pattern']}' . | head -n {matches}"
    if kind == "bash":
        return params["command"]
    if kind == "create":
        return f"cat <<'EOF' > {path}\n{params['content']}EOF"
    if kind == "submit":
        return "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    if kind == "edit":
        old, new, text = params["old"], params["new"], texts[path]
        texts[path] = text.replace(old, new, 1)
        if new == old.removesuffix("\n") + ANNOTATION + "\n":
            line = text[: text.index(old)].count("\n") + 1
            return f"sed -i '{line}s/$/{ANNOTATION}/' {path}"
        return (
            f"python3 - <<'EOF'\nfrom pathlib import Path\np = Path({path!r})\n"
            f"p.write_text(p.read_text().replace({old!r}, {new!r}, 1))\nEOF"
        )
    raise ValueError(f"no mini-swe-agent command for action {kind}")
