"""A tiny task with its reproduction script, its repository's own tests, and fixes right and wrong (a wrong one
passes the reproduction but breaks a test that passed before): what the reproduction tests drive."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent_script import act, reflect

from llm_ide.config import load_config

FILES = {
    "calc.py": "def double(x):\n    return x + x + 1  # BUG\n\n\ndef triple(x):\n    return x + x + x\n",
    "tests/test_calc.py": (
        "import calc\n\n\ndef test_triple():\n    assert calc.triple(2) == 6\n\n\n"
        "def test_double_keeps_floats():\n    assert isinstance(calc.double(2.5), float)\n"
    ),
    "README.md": "calc\n",
}
TASK = "double(2) returns 5 instead of 4; fix calc.double."
REPRO = (
    "import calc\n\nvalue = calc.double(2)\nprint('double(2) =', value)\n"
    "print('Issue resolved' if value == 4 else 'Issue reproduced')\n"
)
RIGHT = "sed -i 's/ + 1  # BUG//' calc.py"
HARDCODED = "sed -i 's/return x + x + 1  # BUG/return 4/' calc.py"  # passes the reproduction, breaks a float test
WRONG = "printf 'see the issue tracker\\n' >> README.md"
# this interpreter has pytest; the plugins of llm-ide's own environment are not the tiny repository's business
REGRESSION = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -rA -p no:cacheprovider -q {{{{ files }}}}"


def config(**reproduction: Any) -> Any:
    """No tools; the regression tests run with this interpreter."""
    return load_config("default", environment={"tools": []},
                       reproduction={"regression_command": REGRESSION, **reproduction})  # fmt: skip


def fix_script(fix: str, check: bool = True) -> list[str]:
    """Apply `fix`, run the reproduction (`reproduce`) when `check`, submit."""
    steps = [act("Apply the fix.", "bash", command=fix), reflect(False, "Applied.")]
    if check:
        steps += [act("Does the reproduction pass now?", "reproduce"), reflect(False, "Checked.")]
    return [*steps, act("Done.", "submit")]


def written(test: str) -> str:
    """A reply of the writing phase."""
    return f"<reproduction>\n```python\n{test}```\n</reproduction>"


def repro_in(folder: Path, text: str = REPRO, name: str = "reproduce_double.py") -> Path:
    path = folder / name
    path.write_text(text)
    return path
