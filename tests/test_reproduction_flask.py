"""A real check of reproduction first (issue 25) on pallets__flask-5014 ("Require a non-empty name for Blueprints"):
its row from the shared SWE-bench Verified file, its repository from the shared bundle, its dependencies from the
package index in a venv. Three scripted attempts through the batch runner (local environment): a check at
registration (the reproduction still fails), names that must be letters (the reproduction passes, blueprints named
`bp2` break) and the gold patch. The reviewer and the chooser prefer the wrong ones; execution alone picks the gold
patch, which the instance's hidden tests (run here afterwards, never shown to the run) confirm."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect
from attempts_scripts import choice, review, write
from conftest import git, unavailable

from llm_ide.run.trajectory import load_trajectory
from llm_ide.swebench.batch import BatchOptions, run_swebench

INSTANCE = "pallets__flask-5014"
DEPENDENCIES = ["werkzeug==2.2.3", "jinja2==3.1.2", "itsdangerous==2.1.2", "click==8.1.3", "blinker==1.5",
                "pytest==7.2.2"]  # fmt: skip
REPRO = """\
import flask

try:
    flask.Blueprint("", __name__)
except ValueError as error:
    print("ValueError:", error)
    print("Issue resolved")
else:
    print("an empty name was accepted")
    print("Issue reproduced")
"""
AT_REGISTRATION = (
    "src/flask/app.py",
    "        blueprint.register(self, options)\n",
    "        if not blueprint.name:\n            raise ValueError(\"'name' may not be empty.\")\n"
    "        blueprint.register(self, options)\n",
)
LETTERS_ONLY = (
    "src/flask/blueprints.py",
    '        if "." in name:\n',
    "        if not name.isalpha():\n            raise ValueError(\"'name' may only hold letters.\")\n\n"
    '        if "." in name:\n',
)
GOLD = (
    "src/flask/blueprints.py",
    '        if "." in name:\n',
    '        if not name:\n            raise ValueError("\'name\' may not be empty.")\n\n        if "." in name:\n',
)


def attempt(edit: tuple[str, str, str]) -> list[str]:
    path, old, new = edit
    return [act("Change it.", "edit", path=path, old=old, new=new), reflect(False, "Changed."), act("Done.", "submit")]


def harness(repo: Path, patch: str, row: dict, folder: Path) -> bool:
    """The instance's FAIL_TO_PASS and PASS_TO_PASS on the patch with its test patch (what the official harness
    runs), in a checkout of its own."""
    checkout = folder / f"graded-{len(list(folder.glob('graded-*')))}"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), "HEAD")
    for text in (patch, row["test_patch"]):
        subprocess.run(["git", "apply"], input=text, text=True, cwd=checkout, check=True)
    tests = json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])
    done = subprocess.run([str(folder / "venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *tests], cwd=checkout, env={"PYTHONPATH": "src", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)  # fmt: skip
    return done.returncode == 0


@pytest.mark.slow
def test_execution_alone_tells_the_gold_patch_from_wrong_ones(shared_dir: Path, tmp_path: Path) -> None:
    rows = (shared_dir / "data" / "swebench" / "SWE-bench_Verified-test.jsonl").read_text().splitlines()
    row = next(json.loads(line) for line in rows if f'"{INSTANCE}"' in line)
    repo = tmp_path / "flask"
    git(
        tmp_path, "clone", "-q", str(shared_dir / "data" / "repos" / "pallets__flask.bundle"), str(repo), "-b", INSTANCE
    )
    venv.create(tmp_path / "venv", with_pip=True)
    pip = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", *DEPENDENCIES],
                         capture_output=True, text=True)  # fmt: skip
    if pip.returncode != 0:
        unavailable(f"flask's dependencies could not be installed from the package index: {pip.stderr[-300:]}")
    head = git(repo, "rev-parse", "HEAD").strip()  # the bundle's commit holds the tree of the row's base commit
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({**row, "repo": str(repo), "base_commit": head, "reproduction": REPRO}) + "\n")
    folder = tmp_path / "scripts"
    for number, edit in enumerate([AT_REGISTRATION, LETTERS_ONLY, GOLD], 1):
        write(folder, f"a{number}.yaml", attempt(edit))
    write(folder, "areview.yaml", [review(9, "Rejects empty names where blueprints are registered."),
                                   review(8, "Strict names avoid every odd case."), review(5, "Minimal.")])  # fmt: skip
    write(folder, "achoose.yaml", [choice(1, "Registration is where an empty name breaks things.")])
    config = tmp_path / "config.yaml"
    path = f"{tmp_path / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    config.write_text(yaml.safe_dump({
        "environment": {"tools": [], "env": {"PATH": path, "PYTHONPATH": "src"}},
        "attempts": {"max": 3},
    }))  # fmt: skip
    options = BatchOptions(model=f"scripted:{folder}/a{{attempt}}.yaml", output=tmp_path / "out",
                           environment="local", config_files=[config])  # fmt: skip
    assert run_swebench(str(dataset), "test", options).counts() == {"submitted": 1}

    traj = load_trajectory(tmp_path / "out" / INSTANCE / f"{INSTANCE}.traj.json")
    attempts = {a["index"]: a for a in traj["info"]["attempts"]}
    choice_made = traj["info"]["choice"]
    print(f"\n{INSTANCE}: chosen attempt {choice_made['attempt']} by {choice_made['by']}")
    for index, record in attempts.items():
        print(f"attempt {index} (review score {record['score']}): rank {record['rank']}")
        for name, value in record["checks"].items():
            print(f"  {name}: {value}")
    first = load_trajectory(tmp_path / "out" / INSTANCE / "attempt1" / f"{INSTANCE}-attempt1.traj.json")
    before = first["info"]["reproduction"]["scripts"][0]["before"]
    print(f"reproduction on the original code: {before['verdict']} (exit {before['returncode']}): {before['output']!r}")
    assert (before["verdict"], before["output"]) == ("reproduced", "an empty name was accepted\nIssue reproduced")
    assert (choice_made["attempt"], choice_made["by"], choice_made["execution"]) == (3, "execution", [3])
    assert [attempts[index]["rank"][0] for index in (1, 2, 3)] == [0, 0, 0]  # every check could run
    assert attempts[1]["rank"][1] == 1 and attempts[2]["rank"][1] == 0 and attempts[2]["rank"][2] > 0
    assert attempts[3]["rank"] == [0, 0, 0]
    assert "tests/test_blueprints.py" in attempts[3]["checks"]["regressions (clean run)"]
    assert [call["kind"] for call in traj["model_calls"]].count("choose") == 0
    graded = {index: harness(repo, a["submission"], row, tmp_path) for index, a in attempts.items()}
    print(f"the instance's hidden tests (FAIL_TO_PASS + PASS_TO_PASS) on each patch: {graded}")
    assert graded == {1: False, 2: False, 3: True}
