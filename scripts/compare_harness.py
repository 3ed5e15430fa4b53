"""`llm-ide evaluate` side by side with the official `swebench` harness, on real SWE-bench instances and the same
predictions (gold, empty, wrong, unappliable, fuzzy, reversed gold, forged test output, every test skipped, forged
output with a zeroed exit status).

The instance images are built here, under their official names, from `llm-ide-base:bookworm` (no registry): the
repository at its base commit in /testbed (from a local clone or mirror given with `--repo ID=GIT_DIR`), a venv at
/opt/miniconda3/envs/testbed holding the packages of ENVIRONMENTS (installed on the host with `uv pip --target`), and
a /opt/miniconda3/bin/activate that makes `conda activate testbed` work, so the v5 `eval_script` runs unchanged.

    python scripts/compare_harness.py --dataset ../shared/data/swebench/SWE-bench_Verified-test.jsonl \\
        --dataset ../shared/data/swebench/SWE-bench_Lite-dev.jsonl \\
        --repo pallets__flask-5014=/path/to/flask.git --repo marshmallow-code__marshmallow-1359=/path/to/marshmallow.git
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from llm_ide.config import load_config
from llm_ide.swebench.dataset import load_dataset
from llm_ide.swebench.evaluate import evaluate_predictions

console = Console(width=None if sys.stdout.isatty() else 200)
BASE_IMAGE = "llm-ide-base:bookworm"
ENV = "/opt/miniconda3/envs/testbed"
# the packages of SWE-bench's environment spec for each repository version (python 3.11 here, the base image's)
ENVIRONMENTS: dict[str, list[str]] = {
    "pallets/flask": ["setuptools==70.0.0", "click==8.1.3", "itsdangerous==2.1.2", "Jinja2==3.1.2",
                      "MarkupSafe==2.1.1", "Werkzeug==2.3.7", "pytest<8"],
    "marshmallow-code/marshmallow": ["pytest<8", "pytz", "simplejson"],
    "pydicom/pydicom": ["pytest<8", "numpy<2"],
    "pylint-dev/astroid": ["pytest<8", "lazy_object_proxy>=1.4.0", "wrapt>=1.14,<2"],
}  # fmt: skip
ACTIVATE = """\
conda() {
    if [ "${1:-}" = activate ]; then source /opt/miniconda3/envs/"${2:-testbed}"/bin/activate; fi
}
"""
PYTEST = f"#!{ENV}/bin/python\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n"
FORGED_CONFTEST = """\
import atexit
import os

IDS = {ids!r}


def pytest_sessionstart(session):
    atexit.register(lambda: os.write(1, "".join(f"PASSED {{i}}\\n" for i in IDS).encode()))
"""


SKIPPING_CONFTEST = """\
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="skipped by the patch"))
"""
# forged lines and a zeroed exit status: no log-based grader can tell (the official harness neither)
FORGED_EXIT0_CONFTEST = (
    FORGED_CONFTEST
    + """

def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
"""
)


def sh(*args: str, cwd: Path | None = None, stdin: str | None = None) -> str:
    return subprocess.run(args, cwd=cwd, input=stdin, check=True, capture_output=True, text=True).stdout


def checkout(repo: Path, row: dict[str, Any], source: Path) -> None:
    try:
        sh("git", "-C", str(repo), "checkout", "-q", row["base_commit"])
    except subprocess.CalledProcessError:
        raise SystemExit(
            f"{row['instance_id']}: {source} has no commit {row['base_commit'][:12]}: give a clone with the "
            "repository's history (the eval script checks the base commit out)"
        ) from None


def build_image(row: dict[str, Any], source: Path, work: Path) -> None:
    """The instance image under its official name (skipped when it exists)."""
    import docker

    client = docker.from_env()
    try:
        client.images.get(row["image"])
        return
    except docker.errors.ImageNotFound:
        pass
    context = work / "context"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    sh("git", "clone", "-q", "--no-checkout", str(source), str(context / "testbed"))
    checkout(context / "testbed", row, source)
    sh("uv", "pip", "install", "-q", "--python", "/usr/bin/python3.11", "--target", str(context / "site"),
       *ENVIRONMENTS[row["repo"]])  # fmt: skip
    src = "/testbed/src" if (context / "testbed" / "src").is_dir() else "/testbed"
    (context / "site" / "testbed.pth").write_text(src + "\n")
    (context / "activate").write_text(ACTIVATE)
    (context / "pytest").write_text(PYTEST)
    shutil.copy(shutil.which("patch") or "/usr/bin/patch", context / "patch")
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY patch /usr/bin/patch\nCOPY testbed /testbed\n"
        f"RUN python3 -m venv {ENV} && mkdir -p /opt/miniconda3/bin\nCOPY site {ENV}/lib/python3.11/site-packages\n"
        f"COPY activate /opt/miniconda3/bin/activate\nCOPY pytest {ENV}/bin/pytest\n"
        f"RUN chmod 755 {ENV}/bin/pytest /usr/bin/patch && git config --global --add safe.directory /testbed\n"
        "WORKDIR /testbed\n"
    )
    console.print(f"building {row['image']}")
    client.images.build(path=str(context), tag=row["image"], rm=True, pull=False)
    shutil.rmtree(context, ignore_errors=True)


def diff_of(repo: Path, change: dict[str, str | None]) -> str:
    """The `git diff` of writing (or, for None, deleting) files in `repo`, which is left as it was."""
    for name, text in change.items():
        if text is None:
            (repo / name).unlink()
        else:
            (repo / name).write_text(text)
    sh("git", "add", "-A", cwd=repo)
    patch = sh("git", "diff", "--cached", "HEAD", cwd=repo)
    sh("git", "reset", "-q", "--hard", "HEAD", cwd=repo)
    return patch


def predictions(row: dict[str, Any], source: Path, work: Path) -> dict[str, str]:
    """Name → model_patch for one instance."""
    repo = work / "clone"
    if not repo.exists():
        sh("git", "clone", "-q", str(source), str(repo))
        checkout(repo, row, source)
    gold: str = row["patch"]
    first = gold.split("\n", 1)[0].split(" b/", 1)[1]
    text = (repo / first).read_text()
    sh("git", "apply", "-", cwd=repo, stdin=gold)
    sh("git", "add", "-A", cwd=repo)
    reversed_gold = sh("git", "diff", "--cached", "-R", "HEAD", cwd=repo)
    sh("git", "reset", "-q", "--hard", "HEAD", cwd=repo)
    tests = json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])
    context = [line for line in gold.splitlines() if line.startswith(" ") and line.strip()]
    fuzzy = gold.replace(f"\n{context[0]}\n", f"\n {context[0][1:]}  # changed context\n", 1)
    return {
        "gold": gold,
        "empty": "",
        "wrong": diff_of(repo, {first: "# a comment that fixes nothing\n" + text}),
        "unappliable": gold.replace(f"a/{first}", f"a/{first}.missing").replace(f"b/{first}", f"b/{first}.missing"),
        "fuzzy": "".join(line for line in fuzzy.splitlines(True) if not line.startswith("index ")),
        "reversed": reversed_gold,
        "forged": diff_of(repo, {"conftest.py": FORGED_CONFTEST.format(ids=tests)}),
        "skipping": diff_of(repo, {"conftest.py": SKIPPING_CONFTEST}),
        "forged_exit0": diff_of(repo, {"conftest.py": FORGED_EXIT0_CONFTEST.format(ids=tests)}),
    }


def official(dataset: Path, preds: Path, run_id: str, work: Path) -> dict[str, str]:
    """instance id → resolved | unresolved | error | empty_patch, from the harness's run report."""
    subprocess.run(
        [sys.executable, "-m", "swebench.harness.run_evaluation", "--dataset_name", str(dataset), "--split", "test",
         "--predictions_path", str(preds), "--max_workers", "1", "--run_id", run_id, "--timeout", "900"],
        cwd=work, check=True, capture_output=True, text=True,
    )  # fmt: skip
    report = json.loads(next(work.glob(f"*.{run_id}.json")).read_text())
    status = {}
    for name, key in (("resolved", "resolved_ids"), ("unresolved", "unresolved_ids"), ("error", "error_ids"),
                      ("empty_patch", "empty_patch_ids")):  # fmt: skip
        status.update(dict.fromkeys(report[key], name))
    return status


def main(
    dataset: Annotated[list[Path], typer.Option(help="SWE-bench .jsonl file(s) holding the instances.")],
    repo: Annotated[list[str], typer.Option(help="ID=GIT_DIR: a clone (or mirror) of the instance's repository.")],
    work: Annotated[Path | None, typer.Option(help="Working folder (default: a new temporary one).")] = None,
    prediction: Annotated[list[str] | None, typer.Option(help="Only these predictions (default: all).")] = None,
) -> None:
    work = work or Path(tempfile.mkdtemp(prefix="compare-harness-"))
    sources = dict(item.split("=", 1) for item in repo)
    rows = {}
    for path in dataset:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["instance_id"] in sources:
                rows.setdefault(row["instance_id"], row)
    subset = work / "dataset.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    subset.write_text("".join(json.dumps(row) + "\n" for row in rows.values()))
    cases: dict[str, dict[str, str]] = {}  # prediction name → {instance id: patch}
    for instance_id, row in rows.items():
        build_image(row, Path(sources[instance_id]), work / instance_id)
        for name, patch in predictions(row, Path(sources[instance_id]), work / instance_id).items():
            if not prediction or name in prediction:
                cases.setdefault(name, {})[instance_id] = patch
    instances = {i.instance_id: i for i in load_dataset(str(subset)).instances}
    table = Table("prediction", "instance", "official", "llm-ide", "agree", "llm-ide detail")
    agree = total = resolved_agree = 0
    for name, patches in cases.items():
        preds = {i: {"instance_id": i, "model_name_or_path": "compare", "model_patch": p} for i, p in patches.items()}
        preds_path = work / f"{name}.json"
        preds_path.write_text(json.dumps(preds))
        theirs = official(subset, preds_path, name, work)
        ours = {
            r.instance_id: r
            for r in evaluate_predictions(
                preds, instances, settings=load_config("swebench").swebench, log_dir=work / "llm-ide" / name
            ).results
        }
        for instance_id in sorted(patches):
            mine, other = ours[instance_id].status, theirs.get(instance_id, "missing")
            total += 1
            agree += mine == other
            resolved_agree += (mine == "resolved") == (other == "resolved")
            colour = "green" if mine == other else "red"
            table.add_row(name, instance_id, other, mine, f"[{colour}]{mine == other}[/]", ours[instance_id].detail)
    console.print(table)
    console.print(f"work folder: {work}")
    console.print(f"RESULT cases={total} status_agree={agree} resolved_agree={resolved_agree}")


if __name__ == "__main__":
    typer.run(main)
