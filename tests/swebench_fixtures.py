"""A tiny SWE-bench-format dataset built for real: git repos with one bug each, tests, and docker images per instance.

Every bug is the same shape (an extra ` + 1` on a line ending in `# BUG`), so one scripted model can fix any of them
with a single `sed`; FAIL_TO_PASS tests arrive in each instance's `test_patch`, as in SWE-bench.
Beside them: the scripted model's replies, the batches the tests run, and the CLI in-process (`cli`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from in_process import invoke
from swebench_images import GIT_ENV, build_image, instance_dockerfile, pytest_image, repo_files

FIX_COMMAND = r"grep -rlZ --include='*.py' -e '# BUG$' . | xargs -0 sed -i 's/ + 1\(.*\)  # BUG$/\1/'"
WRONG_COMMAND = "printf 'see the issue tracker\\n' >> README.md"


@dataclass(frozen=True)
class Spec:
    instance_id: str
    files: dict[str, str]  # the repository at its base commit (bug included)
    test_patch_files: dict[str, str]  # test files after the test patch (FAIL_TO_PASS tests added)
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    image_field: str | None  # "image_name", "image" or None (the official name rule)
    v5_eval_script: bool = False


def specs(count: int = 3) -> list[Spec]:
    """`count` instances cycling through three small projects (calc, text, shapes)."""
    makers = [_calc, _text, _shapes]
    return [makers[i % 3](i // 3 + 1) for i in range(count)]


def _calc(n: int) -> Spec:
    stats = "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / (len(xs) + 1)  # BUG\n"
    tests = "from calc.stats import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n"
    patched = tests.replace("import total", "import mean, total") + (
        "\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"
    )
    return Spec(
        f"demo__calc-{n}",
        {"README.md": "# calc\n", "calc/__init__.py": "", "calc/stats.py": stats, "tests/test_stats.py": tests},
        {"tests/test_stats.py": patched},
        ["tests/test_stats.py::test_mean"],
        ["tests/test_stats.py::test_total"],
        "image_name",
    )


def _text(n: int) -> Spec:
    words = (
        "def shout(s):\n    return s.upper() + '!'\n\n\n"
        "def last_word(s):\n    words = s.split()\n    return words[len(words) - 1 + 1]  # BUG\n"
    )
    tests = "from text.words import shout\n\n\ndef test_shout():\n    assert shout('hi') == 'HI!'\n"
    new_test = (
        "import pytest\n\nfrom text.words import last_word\n\n\n"
        "@pytest.mark.parametrize(('s', 'w'), [('a b c', 'c'), ('one', 'one')])\n"
        "def test_last_word(s, w):\n    assert last_word(s) == w\n"
    )
    return Spec(
        f"demo__text-{n}",
        {"README.md": "# text\n", "text/__init__.py": "", "text/words.py": words, "tests/test_shout.py": tests},
        {"tests/test_last.py": new_test},
        # as in SWE-bench's files, an id with a space is cut there (the official pytest log parser cuts it so)
        ["tests/test_last.py::test_last_word[a", "tests/test_last.py::test_last_word[one-one]"],
        ["tests/test_shout.py::test_shout"],
        None,
    )


def _shapes(n: int) -> Spec:
    rect = (
        "class Rect:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n\n"
        "    def perimeter(self):\n        return 2 * (self.w + self.h)\n\n"
        "    def area(self):\n        return (self.w + 1) * self.h  # BUG\n"
    )
    tests = "from shapes.rect import Rect\n\n\ndef test_perimeter():\n    assert Rect(2, 3).perimeter() == 10\n"
    patched = tests + "\n\ndef test_area():\n    assert Rect(2, 3).area() == 6\n"
    return Spec(
        f"demo__shapes-{n}",
        {"README.md": "# shapes\n", "shapes/__init__.py": "", "shapes/rect.py": rect, "tests/test_rect.py": tests},
        {"tests/test_rect.py": patched},
        ["tests/test_rect.py::test_area"],
        ["tests/test_rect.py::test_perimeter"],
        "image",
        v5_eval_script=True,
    )


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)


def fixed(text: str) -> str:
    """What FIX_COMMAND does to a file."""
    return re.sub(r" \+ 1(.*)  # BUG$", r"\1", text, flags=re.M)


def diff_after(repo: Path, files: dict[str, str]) -> str:
    """The `git diff` that turns the base commit into `files`, leaving the repository as it was."""
    write_files(repo, files)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    return patch


def official_image(instance_id: str) -> str:
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


def build_repo(spec: Spec, root: Path) -> tuple[Path, str, str, str]:
    """(repo, base commit, gold patch, test patch)."""
    repo = root / spec.instance_id
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    write_files(repo, spec.files)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    gold = diff_after(repo, {name: fixed(text) for name, text in spec.files.items() if "# BUG" in text})
    test_patch = diff_after(repo, spec.test_patch_files)
    return repo, base, gold, test_patch


def v5_eval_script(base: str, test_patch: str, test_files: list[str]) -> str:
    """An eval script in the shape of SWE-bench v5's `eval_script` field."""
    files = " ".join(test_files)
    return (
        "#!/bin/bash\nset -uxo pipefail\ncd /testbed\ngit config --global --add safe.directory /testbed\n"
        f"git checkout {base} {files}\ngit apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912\n"
        f": '>>>>> Start Test Output'\npython -m pytest -rA {files}\n: '>>>>> End Test Output'\n"
        f"git checkout {base} {files}\n"
    )


def instance_row(spec: Spec, repo: Path, base: str, gold: str, test_patch: str, image: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "repo": str(repo),
        "instance_id": spec.instance_id,
        "base_commit": base,
        "patch": gold,
        "test_patch": test_patch,
        "problem_statement": f"A function in {spec.instance_id.split('__')[1]} is off by one; fix it.",
        "version": "1.0",
        # SWE-bench files hold JSON strings; the calc rows use plain lists (both forms are accepted)
        "FAIL_TO_PASS": spec.fail_to_pass if "calc" in spec.instance_id else json.dumps(spec.fail_to_pass),
        "PASS_TO_PASS": spec.pass_to_pass if "calc" in spec.instance_id else json.dumps(spec.pass_to_pass),
    }
    if spec.image_field:
        row[spec.image_field] = image
    if spec.v5_eval_script:
        row["eval_script"] = v5_eval_script(base, test_patch, sorted({t.split("::")[0] for t in spec.pass_to_pass}))
        row["log_parser"] = "parse_log_pytest"
        row["eval_type"] = "pass_and_fail"  # the official harness's v5 rows carry it too
    return row


def build_dataset(root: Path, count: int = 3, *, client: Any = None) -> tuple[Path, list[dict[str, Any]]]:
    """Repos + rows (+ one image per instance when `client` is given); returns (dataset.jsonl, rows)."""
    rows = []
    root.mkdir(parents=True, exist_ok=True)
    base_image = pytest_image(client) if client is not None else None
    for spec in specs(count):
        repo, base, gold, test_patch = build_repo(spec, root / "repos")
        tag = f"llm-ide-test/{spec.instance_id.replace('__', '.')}:latest"
        image = official_image(spec.instance_id) if spec.image_field is None else tag
        if client is not None:
            dockerfile = instance_dockerfile(base_image, base)
            build_image(client, tag, repo_files(repo), dockerfile, [image] if image != tag else [])
        rows.append(instance_row(spec, repo, base, gold, test_patch, image))
    path = root / "dataset.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path, rows


def reply(thought: str, action_type: str, params: dict[str, Any]) -> str:
    return (
        f"<thought>{thought}</thought>\n<action_type>{action_type}</action_type>\n"
        f"<action_params>{json.dumps(params)}</action_params>\n"
    )


def reflection(summary: str) -> str:
    return f"<bad_action>false</bad_action>\n<lessons></lessons>\n<summary>{summary}</summary>\n"


def script(commands: list[str]) -> list[str]:
    """Responses for: one bash action per command, each reflected on as good, then submit."""
    responses: list[str] = []
    for number, command in enumerate(commands):
        if number:
            responses.append(reflection(f"Ran step {number}."))
        responses.append(reply(f"Step {number + 1}.", "bash", {"command": command}))
    responses.append(reflection("Done."))
    responses.append(reply("The fix is in place; submit.", "submit", {}))
    return responses


def write_script(path: Path, commands: list[str]) -> str:
    path.write_text(yaml.safe_dump({"responses": script(commands)}, sort_keys=False))
    return f"scripted:{path}"


def cli(
    program: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`program` (llm-ide or mini-extra) with `args`, in-process."""
    return invoke(*args, program=program, env=env, cwd=cwd)


def gated_batch(folder: Path, instances: int = 1) -> list[str]:
    """`swebench` arguments (local environment) for instances whose first command prints nothing until
    `folder/gate` exists (it adds a line to `folder/trail` and makes `folder/started` each time it runs), then fixes it;
    the batch's output in `folder/out`."""
    data, _ = build_dataset(folder / "data", instances)
    wait = f"echo waited >> {folder}/trail; touch {folder}/started; while [ ! -e {folder}/gate ]; do sleep 0.05; done"
    config = folder / "c.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": [], "writable": [str(folder)]}}))
    model = write_script(folder / "m.yaml", [wait, FIX_COMMAND])
    return ["swebench", "--subset", str(data), "--split", "test", "--model", model, "--environment", "local",
            "--output", str(folder / "out"), "--config", str(config)]  # fmt: skip


def dollar_calls(folder: Path, runs: int) -> tuple[list[Any], Path]:
    """A fix-check-submit session of three calls (one per step, each judging the previous step), every call costing $1
    (1M input tokens at $1/M of `gpt-test`), `runs` times over, and the batch config that prices it."""
    from openai_server import Reply

    one_dollar = {"input_tokens": 1_000_000, "output_tokens": 0}
    calls = [
        Reply(reply("Fix it.", "bash", {"command": FIX_COMMAND}), **one_dollar),
        Reply(reflection("Fixed.") + reply("Check.", "bash", {"command": "git diff --stat"}), **one_dollar),
        Reply(reflection("Checked.") + reply("Submit.", "submit", {}), **one_dollar),
    ]
    config = write_config(folder / "c.yaml")
    data = yaml.safe_load(config.read_text())
    data["model"] = {"prices": {"gpt-test": {"input": 1.0, "output": 0.0}}}
    config.write_text(yaml.safe_dump(data))
    return calls * runs, config


def priced_options(folder: Path, config: Path, url: str, **options: Any) -> Any:
    """A local batch of `gpt-test` (priced by `config`, served at `url`) into `folder/out`."""
    from llm_ide.swebench.batch import BatchOptions

    return BatchOptions(
        model="gpt-test", output=folder / "out", environment="local", config_files=[config], base_url=url, **options
    )


def dollar_steps(folder: Path, calls: int) -> tuple[list[Any], Path]:
    """`calls` replies of $1 each that serve as a reflection and as an action alike (a bash command, never a submit),
    so runs served by one endpoint at the same time take them in any order; and the config that prices them."""
    from openai_server import Reply

    text = reflection("Went on.") + reply("Go on.", "bash", {"command": "echo step >> steps.txt"})
    _, config = dollar_calls(folder, 1)
    return [Reply(text, input_tokens=1_000_000, output_tokens=0)] * calls, config


def assert_four_dollars(server: Any, summary: Any) -> None:
    """$4 of budget, $1 calls (dollar_steps), runs calling at once: four calls in all, each run ended by the limit."""
    assert server.hits == 4
    assert summary.cost == 4.0 and sum(outcome.cost for outcome in summary.outcomes.values()) == 4.0
    assert {outcome.exit_status for outcome in summary.outcomes.values()} == {"cost_limit"}
    assert len(summary.outcomes) == 3 and summary.not_started == []


def write_config(path: Path, **agent: Any) -> Path:
    """Batch config for the tests: no tools to install (offline, fast)."""
    path.write_text(yaml.safe_dump({"environment": {"tools": []}, "agent": {"step_limit": 30, **agent}}))
    return path


@dataclass
class TinyDataset:
    path: Path
    rows: list[dict[str, Any]]
    client: Any

    def row(self, instance_id: str) -> dict[str, Any]:
        return next(row for row in self.rows if row["instance_id"] == instance_id)


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> TinyDataset:
    """Three instances (calc, text, shapes) with their images; images are cached by content across sessions."""
    from conftest import base_image_client

    client = base_image_client()
    path, rows = build_dataset(tmp_path_factory.mktemp("swebench"), 3, client=client)
    return TinyDataset(path, rows, client)


def containers_held_by(client: Any, prefix: str, pid: int) -> list[str]:
    """The containers of runs whose id starts with `prefix` that process `pid` holds (a batch started as a child)."""
    from llm_ide.environments.docker.cleanup import PID_LABEL

    containers = client.api.containers(all=True, filters={"label": [f"{PID_LABEL}={pid}"]})
    return [c["Names"][0] for c in containers if c["Labels"].get("llm-ide.run-id", "").startswith(prefix)]


def leftover_containers(client: Any, prefix: str, *, anyones: bool = False) -> list[str]:
    """Labelled containers of runs whose id starts with `prefix` (one listing call: no race with removal) that this
    process still holds or whose own process is gone: what the test's runs, in-process or killed children, left.
    Another xdist worker's live runs of the same instances are theirs. `anyones`: every one (for a prefix no other
    process uses, or runs whose processes outlive them: Ray's workers)."""
    from llm_ide.environments.docker.cleanup import PID_LABEL, owner_alive

    containers = client.api.containers(all=True, filters={"label": "llm-ide.run-id"})
    ours = [c for c in containers if c["Labels"].get("llm-ide.run-id", "").startswith(prefix)]
    left = [
        c for c in ours if anyones or c["Labels"].get(PID_LABEL) == str(os.getpid()) or not owner_alive(c["Labels"])
    ]
    return [c["Names"][0] for c in left]
