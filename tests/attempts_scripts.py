"""Scripted attempts at one tiny task: a right fix, a wrong one, reviews and choices in the reviewer's and chooser's
formats; `attempt{attempt}.yaml` files give each attempt its own script."""

from __future__ import annotations

from pathlib import Path

import yaml
from agent_script import act, reflect

FILES = {
    "calc.py": "def double(x):\n    return x + x + 1  # BUG\n",
    "test_calc.py": "import calc\n\nprint('double(2) =', calc.double(2))\nassert calc.double(2) == 4\n",
    "README.md": "calc\n",
}
TASK = "double(2) returns 5 instead of 4; fix calc.double."
RIGHT = "sed -i 's/ + 1  # BUG//' calc.py"
WRONG = "printf 'see the issue tracker\\n' >> README.md"
TEST = "python3 test_calc.py"


def attempt_script(fix: str, lesson: str = "") -> list[str]:
    """Run the check (its output is the attempt's test output), apply `fix`, submit."""
    return [
        act("Check what double(2) gives; run the test.", "bash", command=TEST),
        reflect(False, "double(2) is 5.", lesson),
        act("Apply the fix.", "bash", command=fix),
        reflect(False, "Applied."),
        act("Done.", "submit"),
    ]


def review(score: float, reasons: str) -> str:
    return f"<score>{score}</score>\n<reasons>{reasons}</reasons>"


def choice(number: int, reasons: str) -> str:
    return f"<choice>{number}</choice>\n<reasons>{reasons}</reasons>"


def write(folder: Path, name: str, responses: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False))
    return path


def scripts(folder: Path, attempts: list[list[str]], reviews: list[str], choices: list[str] = ()) -> str:
    """The model spec (`scripted:<folder>/attempt{attempt}.yaml`): attempt N's file, `attemptreview.yaml` and
    `attemptchoose.yaml` for the reviewer and the chooser (their `{attempt}` is their role)."""
    for number, responses in enumerate(attempts, 1):
        write(folder, f"attempt{number}.yaml", responses)
    write(folder, "attemptreview.yaml", reviews)
    write(folder, "attemptchoose.yaml", list(choices) or [choice(1, "unused")])
    return f"scripted:{folder}/attempt{{attempt}}.yaml"
