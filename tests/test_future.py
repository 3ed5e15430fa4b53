"""The agent sees nothing from the repository's future (issue 23 §1): a source repository whose fix was committed
after the base commit, tagged v2.0 and on a branch `release`, with a stash, reflogs, an unreachable commit and
FETCH_HEAD; the agent's own commands (git log --all, git tag, git show <sha>, git fsck --lost-found, …) find none of it
in a local SWE-bench checkout, in a container's copy of a repository and in an image's /testbed. A user's own
repository in a local run keeps all of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, base_image_client, git
from in_process import invoke
from swebench_fixtures import FIX_COMMAND, build_dataset, fixed, write_config
from swebench_fixtures import write_script as write_batch_script
from swebench_images import build_image

from llm_ide.config import load_config
from llm_ide.environments.bwrap import bwrap_path
from llm_ide.run.single import run_task

MARK = "FUTURE-FIX-7731"
IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t"]


def add_future(repo: Path) -> dict[str, str]:
    """On top of the base commit (HEAD): the fix committed, tagged v2.0 and on `release`, a dangling commit and a
    stash; HEAD back on the base. The shas of what must not be seen."""
    base = git(repo, "rev-parse", "HEAD").strip()
    for path in repo.rglob("*.py"):
        if "# BUG" in path.read_text():
            path.write_text(fixed(path.read_text()) + f"# {MARK}\n")
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "-q", "-m", f"fix ({MARK})")
    fix = git(repo, "rev-parse", "HEAD").strip()
    git(repo, *IDENTITY, "tag", "-a", "v2.0", "-m", f"release ({MARK})")
    git(repo, "branch", "release")
    git(repo, *IDENTITY, "commit", "-q", "--allow-empty", "-m", f"lost ({MARK})")
    lost = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", base)
    (repo / "wip.txt").write_text(f"{MARK}\n")
    git(repo, *IDENTITY, "stash", "push", "-q", "-u", "-m", MARK)
    return {"base": base, "fix": fix, "lost": lost}


def probe(shas: dict[str, str]) -> str:
    """What an agent tries: every view of the history git offers, and the future's objects by their shas."""
    fix, lost = shas["fix"], shas["lost"]
    return (
        "git log --all --oneline --decorate; git tag -n; git branch -a; git stash list; git reflog --all;"
        f" git show {fix} | head -5; git show {lost}; git cat-file -p {fix}; git show v2.0; git fsck --lost-found;"
        " ls .git/lost-found/* 2>/dev/null; cat .git/FETCH_HEAD .git/ORIG_HEAD .git/packed-refs 2>/dev/null;"
        " git count-objects -v | grep -v size; echo PROBED"
    )


def assert_unseen(observation: str, shas: dict[str, str]) -> None:
    """Only git's refusals name what the probe asked for (`fatal: bad object <sha>`, `ambiguous argument 'v2.0'`)."""
    assert "PROBED" in observation and MARK not in observation
    answers = [line for line in observation.splitlines() if not line.startswith(("fatal:", "Use '--'", "'git <"))]
    for hidden in ("v2.0", "release", "stash", shas["fix"][:7], shas["lost"][:7]):
        assert not [line for line in answers if hidden in line], (hidden, observation)
    assert answers[0].startswith(f"{shas['base'][:7]} (HEAD") and answers[0].endswith(" base")  # the base is there
    assert "fatal: bad object " + shas["fix"] in observation


def assert_kept(repo: Path, shas: dict[str, str]) -> None:
    """The source repository still holds its future (nothing outside our own checkout is rewritten)."""
    assert git(repo, "rev-parse", "v2.0^{commit}").strip() == shas["fix"]
    assert git(repo, "rev-parse", "release").strip() == shas["fix"]
    assert MARK in git(repo, "stash", "list")


def source_dataset(tmp_path: Path, client: object = None) -> tuple[Path, dict, dict[str, str]]:
    """One tiny instance whose source repository has a future."""
    path, [row] = build_dataset(tmp_path / "data", 1, client=client)
    shas = add_future(Path(row["repo"]))
    assert shas["base"] == row["base_commit"]
    return path, row, shas


def observations(output: Path, instance_id: str) -> list[str]:
    trajectory = json.loads((output / instance_id / f"{instance_id}.traj.json").read_text())
    return [op["observation"] for op in trajectory["operations"]]


def test_a_local_swebench_checkout_holds_nothing_after_the_base_commit(tmp_path: Path) -> None:
    from llm_ide.swebench.batch import BatchOptions, run_swebench

    dataset, row, shas = source_dataset(tmp_path)
    options = BatchOptions(
        model=write_batch_script(tmp_path / "s.yaml", [probe(shas), FIX_COMMAND]), output=tmp_path / "out",
        environment="local", config_files=[write_config(tmp_path / "c.yaml")],
    )  # fmt: skip
    summary = run_swebench(str(dataset), "test", options)
    assert summary.counts() == {"submitted": 1}
    seen = observations(options.output, row["instance_id"])
    assert_unseen(seen[0], shas)
    log = (options.output / row["instance_id"] / f"{row['instance_id']}.log").read_text()
    said = f"removed what came after the base commit {shas['base'][:12]}: 1 remote (origin), 1 ref (refs/tags/v2.0), "
    assert re.search(re.escape(said) + r"\d+ reflog entries, \d+ unreachable objects$", log, re.M), log  # (1 remotes)
    assert json.loads((options.output / "preds.json").read_text())[row["instance_id"]]["model_patch"] == row["patch"]
    assert_kept(Path(row["repo"]), shas)


def run_in(tmp_path: Path, repo: Path, shas: dict[str, str], **environment: object) -> list[dict]:
    settings = load_config("default", environment={"tools": [], **environment})
    steps = [act("Look around.", "bash", command=probe(shas)), reflect(False, "looked"), act("Done.", "submit")]
    result = run_task(
        "t", model=write_script(tmp_path / "s.yaml", steps), settings=settings, output_dir=tmp_path / "out",
        run_id="f", repo=repo,
    )  # fmt: skip
    assert result.exit_status == "submitted", result.error
    return json.loads(result.trajectory_path.read_text())["operations"]


@pytest.mark.parametrize(("mode", "hidden"), [("auto", False), ("always", True)])
def test_a_users_own_repository_is_scrubbed_only_when_asked(tmp_path: Path, mode: str, hidden: bool) -> None:
    """`llm-ide run --repo` works in the user's repository: its branches, tags and stash are the user's and stay
    (`auto`); `environment.scrub_history: always` is for a throwaway checkout."""
    _, row, shas = source_dataset(tmp_path)
    repo = Path(row["repo"])
    operations = run_in(tmp_path, repo, shas, sandbox="none", scrub_history=mode)
    if hidden:
        assert_unseen(operations[0]["observation"], shas)
        assert git(repo, "tag").split() == [] and git(repo, "stash", "list") == ""
    else:
        assert MARK in operations[0]["observation"] and shas["fix"][:7] in operations[0]["observation"]
        assert_kept(repo, shas)


def test_a_mark_in_the_users_repository_does_not_have_it_scrubbed(tmp_path: Path) -> None:
    """The user's repository marked as llm-ide's own checkout (`git config llm-ide.owned true`, the mark SWE-bench
    checkouts once had; a sandboxed command can no longer write the config, an unsandboxed one can): a run there keeps
    its branches, tags and stash, and its command's try to set the mark is refused."""
    _, row, shas = source_dataset(tmp_path)
    repo = Path(row["repo"])
    git(repo, "config", "llm-ide.owned", "true")
    settings = load_config("default", environment={"tools": []})
    steps = [
        act("Mark.", "bash", command="git config llm-ide.owned true"),
        reflect(False, "marked"),
        act("Done.", "submit"),
    ]
    for run_id, script in (("mark", steps), ("next", None)):
        result = run_task(
            "t", model=write_script(tmp_path / "s.yaml", script or steps[-1:]), settings=settings,
            output_dir=tmp_path / run_id, run_id=run_id, repo=repo,
        )  # fmt: skip
        assert result.exit_status == "submitted", result.error
    trajectory = json.loads((tmp_path / "mark" / "mark.traj.json").read_text())
    refused = "error: could not write config file .git/config"  # in the sandbox; without bubblewrap it is written
    assert trajectory["operations"][0]["observation"].startswith(refused) == (bwrap_path() is not None)
    assert_kept(repo, shas)


@pytest.mark.docker
def test_a_containers_copy_of_a_repository_holds_nothing_after_the_base_commit(tmp_path: Path) -> None:
    base_image_client()
    _, row, shas = source_dataset(tmp_path)
    source = Path(row["repo"])
    clone = tmp_path / "clone"  # remote-tracking refs, FETCH_HEAD and reflogs as a fetched clone has them
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
    git(clone, "fetch", "-q", "origin")
    git(clone, "checkout", "-q", shas["base"])
    operations = run_in(tmp_path, clone, shas, type="docker", image=BASE_IMAGE)
    assert_unseen(operations[0]["observation"], shas)
    assert git(clone, "rev-parse", "origin/release").strip() == shas["fix"]  # the host's copy is left as it was
    assert_kept(source, shas)
    said = f"removed what came after the base commit {shas['base'][:12]} (the container's copy; the repository given"
    assert f"{said} is left as it is): 1 remote (origin)" in (tmp_path / "out" / "f.log").read_text()


def official_verdict(dataset: Path, predictions: Path, run_id: str, cwd: Path) -> dict[str, list[str]]:
    """The official harness (swebench) on a file of predictions: its report's resolved and unresolved ids."""
    args = ["--dataset_name", str(dataset), "--split", "test", "--predictions_path", str(predictions)]
    args += ["--max_workers", "1", "--run_id", run_id]
    for _ in range(3):  # its report lists every container of the host: one the suite's other workers remove meanwhile
        done = subprocess.run(  # is a NotFound; run again, it grades nothing twice (each instance's report is kept)
            [sys.executable, "-m", "swebench.harness.run_evaluation", *args], cwd=cwd, capture_output=True
        )
        if done.returncode == 0 or b"No such container" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = json.loads(next(cwd.glob(f"*.{run_id}.json")).read_text())
    return {key: report[key] for key in ("resolved_ids", "unresolved_ids", "error_ids")}


@pytest.mark.docker
@pytest.mark.slow
def test_an_images_repository_is_scrubbed_and_the_verdicts_are_the_gold_patchs(tmp_path: Path) -> None:
    """An instance image whose /testbed holds the future (the fix on a branch and a tag, the reflog of the reset back
    to the base, a stash): the agent's probe finds none of it, and its prediction gets the gold patch's verdict from
    the official harness and from `llm-ide evaluate`, each grading in a fresh container from the same image (which
    still holds that history: the evaluation never sees our removal)."""
    from llm_ide.swebench.dataset import load_dataset
    from llm_ide.swebench.evaluate import evaluate_predictions

    client = base_image_client()
    dataset, rows = build_dataset(tmp_path / "data", 3, client=client)
    row = next(r for r in rows if "eval_script" in r)  # a v5 row (its own eval script): the harness grades it as is
    shas = add_future(Path(row["repo"]))
    image = f"llm-ide-test/future-{os.getpid()}:latest"
    dockerfile = (
        f"FROM {row['image']}\nCOPY future.bundle /tmp/future.bundle\nWORKDIR /testbed\n"
        "RUN git fetch -q --update-head-ok /tmp/future.bundle 'refs/*:refs/*'"
        " && git checkout -q v2.0 && git checkout -q -"
        f" && echo {MARK} > wip.txt && git -c user.name=t -c user.email=t@t stash push -q -u -m {MARK}"
        " && rm /tmp/future.bundle && git log --all --oneline | grep -q FUTURE\n"
    )
    bundle = tmp_path / "future.bundle"
    git(Path(row["repo"]), "bundle", "create", str(bundle), "--all")
    build_image(client, image, {"future.bundle": bundle}, dockerfile, [])
    try:
        dataset.write_text(json.dumps({**row, "image": image}) + "\n")
        output = tmp_path / "out"
        args = ["swebench", "--subset", str(dataset), "--split", "test", "--output", str(output)]
        args += ["--model", write_batch_script(tmp_path / "s.yaml", [probe(shas), FIX_COMMAND])]
        args += ["--config", str(write_config(tmp_path / "c.yaml"))]
        done = invoke(*args)
        assert done.returncode == 0, done.stderr
        assert_unseen(observations(output, row["instance_id"])[0], shas)
        preds = json.loads((output / "preds.json").read_text())
        assert preds[row["instance_id"]]["model_patch"] == row["patch"]
        gold = {
            row["instance_id"]: {**preds[row["instance_id"]], "model_name_or_path": "gold", "model_patch": row["patch"]}
        }
        (tmp_path / "gold.json").write_text(json.dumps(gold))
        official = {
            name: official_verdict(dataset, path, name, tmp_path)
            for name, path in (("agent", output / "preds.json"), ("gold", tmp_path / "gold.json"))
        }
        assert official["agent"] == official["gold"] == {
            "resolved_ids": [row["instance_id"]], "unresolved_ids": [], "error_ids": [],
        }  # fmt: skip
        instances = {i.instance_id: i for i in load_dataset(str(dataset), "test").instances}
        ours = {}
        for name, predictions in (("agent", preds), ("gold", gold)):
            settings = load_config("swebench").swebench
            report = evaluate_predictions(predictions, instances, settings=settings, log_dir=tmp_path / name)
            ours[name] = [(r.instance_id, r.status, r.fail_to_pass, r.pass_to_pass) for r in report.results]
        assert ours["agent"] == ours["gold"] and ours["agent"][0][1] == "resolved"
        git_log = ["docker", "run", "--rm", image, "git", "-C", "/testbed", "log", "--all", "--oneline"]
        assert MARK in subprocess.run(git_log, capture_output=True, text=True).stdout  # the image is as it was
    finally:
        client.images.remove(image, force=True)
