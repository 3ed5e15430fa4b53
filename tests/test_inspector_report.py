"""`llm-ide report`: a batch's table in text and its HTML page (in headless Chromium, its filters and links), evaluation
errors, unpriced runs, counts in the singular, ids and paths that would leave the batch's folder."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import agent_script
import pytest
import yaml
from agent_script import act
from conftest import make_git_repo
from in_process import invoke
from inspector_support import cli, text_of
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config, write_script

from llm_ide.swebench.batch import BatchOptions, run_swebench


def test_a_report_into_a_file_or_a_pipe_keeps_every_cell_whole(tmp_path: Path) -> None:
    """Not a terminal: rich would fit the table to 80 columns and cut the ids (`psf__requests-…`, two rows alike)."""
    long_id, error = "scikit-learn__scikit-learn-14087", "the tests did not run to the end (no test-output markers)"
    statuses = {long_id: {"exit_status": "submitted", "cost": 0.5}, "psf__requests-1142": {"exit_status": "cost_limit"}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump({"instances": statuses}))
    (tmp_path / "eval").mkdir()
    evaluation = {"resolved_ids": ["psf__requests-1142"], "error_ids": [long_id]}
    evaluation["instances"] = {long_id: {"status": "error", "detail": error}}
    (tmp_path / "eval" / "report.json").write_text(json.dumps(evaluation))
    result = cli("report", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines() if "│" in line]
    assert rows == [
        ["psf__requests-1142", "cost_limit", "0", "$0.0000", "resolved", ""],
        [long_id, "submitted", "0", "$0.5000", "—", error],
    ]
    page = cli("report", str(tmp_path), "--html", f"{tmp_path}/pages/")  # a folder yet to be made: report.html in it
    assert page.returncode == 0 and (tmp_path / "pages" / "report.html").is_file(), page.stderr
    bogus = cli("report", str(tmp_path), "--status", "bogus")  # no empty table for a status that does not exist
    assert (bogus.returncode, bogus.stdout) == (2, "")
    assert bogus.stderr.startswith("error: --status bogus: not an exit status; one of submitted, step_limit, ")


def test_batch_report_lists_instances_links_their_pages_and_filters(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    dataset, rows = build_dataset(tmp_path / "data", 3)
    model = write_script(tmp_path / "fix.yaml", ["grep -rn '# BUG' --include='*.py' .", FIX_COMMAND])
    config = write_config(tmp_path / "c.yaml")
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "agent": {"step_limit": 1}}))
    out = tmp_path / "out"
    for configs, only in (([short], "demo__calc"), ([config], "text|shapes")):
        options = BatchOptions(model=model, output=out, environment="local", config_files=configs)
        run_swebench(str(dataset), "test", options, filter_regex=only)
    ids = sorted(row["instance_id"] for row in rows)
    (out / "eval").mkdir()
    (out / "eval" / "report.json").write_text(json.dumps({"resolved_ids": ["demo__text-1"], "unresolved_ids": ids[:1]}))

    text = cli("report", str(out), "--unresolved")
    assert text.returncode == 0, text.stderr
    assert (
        "demo__calc-1" in text.stdout and "demo__text-1" not in text.stdout and "1 of 3 instances shown" in text.stdout
    )

    result = cli("report", str(out), "--html", str(tmp_path / "report.html"))
    assert result.returncode == 0, result.stderr
    browser.get((tmp_path / "report.html").as_uri())

    def visible() -> list[str]:
        return [r.get_attribute("data-status") + " " + text_of(r.find_element(By.TAG_NAME, "a"))
                for r in browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr") if r.is_displayed()]  # fmt: skip

    assert visible() == ["step_limit demo__calc-1", "submitted demo__shapes-1", "submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("submitted")
    assert visible() == ["submitted demo__shapes-1", "submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-resolved")).select_by_value("yes")
    assert visible() == ["submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-resolved")).select_by_value("unknown")
    assert visible() == ["submitted demo__shapes-1"]
    assert text_of(browser.find_element(By.ID, "shown-count")) == "1 of 3 shown"
    assert "1 resolved" in text_of(browser.find_element(By.ID, "totals"))
    browser.find_element(By.LINK_TEXT, "demo__shapes-1").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tree .node")) == 3
    assert browser.get_log("browser") == []


def test_report_shows_evaluation_errors_in_their_own_column_and_total(tmp_path: Path) -> None:
    ids = ["a__x-1", "b__y-1", "c__z-1", "d__w-1"]
    statuses = {"instances": {i: {"exit_status": "submitted", "cost": 0.5} for i in ids}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    detail = "image swebench/sweb.eval.x86_64.c_1776_z-1:latest not found"
    report = {
        "resolved_ids": ["a__x-1"],
        "unresolved_ids": ["b__y-1"],
        "error_ids": ["c__z-1"],
        "empty_patch_ids": [],
        "instances": {"c__z-1": {"status": "error", "detail": detail}},
    }
    (tmp_path / "evaluations" / "preds.1").mkdir(parents=True)
    (tmp_path / "evaluations" / "preds.1" / "report.json").write_text(json.dumps(report))

    def report_rows(*args: str) -> tuple[dict[str, list[str]], str]:
        done = invoke("report", str(tmp_path), *args, env={**os.environ, "COLUMNS": "200"})
        assert (done.returncode, done.stderr) == (0, "")
        cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in done.stdout.splitlines() if "__" in line]
        return {row[0]: row[4:] for row in cells}, done.stdout.splitlines()[-1]

    rows, totals = report_rows()
    assert rows == {
        "a__x-1": ["resolved", ""],
        "b__y-1": ["not resolved", ""],
        "c__z-1": ["—", detail],
        "d__w-1": ["—", ""],
    }
    assert totals == (
        "4 of 4 instances shown; their total 0 steps, $2.0000, 1 resolved, 1 not resolved, 1 evaluation error"
    )
    assert report_rows("--unresolved") == (  # the totals of the rows shown (they were the batch's)
        {"b__y-1": ["not resolved", ""]},
        "1 of 4 instances shown; their total 0 steps, $0.5000, 0 resolved, 1 not resolved, 0 evaluation errors",
    )
    assert list(report_rows("--resolved")[0]) == ["a__x-1"]
    filtered = invoke("report", str(tmp_path), "--resolved", "--html", str(tmp_path / "resolved.html"))
    assert (filtered.returncode, filtered.stdout.split(" → ")[0]) == (0, "1 of 4 instances")
    assert (tmp_path / "resolved.html").read_text().count("data-resolved=") == 1

    shutil.rmtree(tmp_path / "evaluations")  # an empty table without a word, before
    refused = invoke("report", str(tmp_path), "--unresolved")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: --unresolved: no evaluation of {tmp_path} found"
        f" (llm-ide evaluate {tmp_path / 'preds.json'}, or --eval)\n"
    )
    (tmp_path / "evaluations" / "preds.1").mkdir(parents=True)
    (tmp_path / "evaluations" / "preds.1" / "report.json").write_text(json.dumps(report))

    page = tmp_path / "report.html"
    done = invoke("report", str(tmp_path), "--html", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert '<span class="resolved-error">1 evaluation error</span>' in html
    assert f'<td class="resolved-error">{detail}</td>' in html and html.count('data-resolved="error"') == 1
    (tmp_path / "pages").mkdir()  # a folder: report.html in it, as inspect's page (was "Is a directory")
    into = invoke("report", str(tmp_path), "--html", str(tmp_path / "pages"))
    assert (into.returncode, into.stdout.split(" → ")[1].split(" (")[0]) == (0, str(tmp_path / "pages" / "report.html"))
    assert (tmp_path / "pages" / "report.html").read_text() == html


@pytest.mark.parametrize(
    ("instance_id", "trajectory", "said"),
    [
        ("../../x", None, "instance id '../../x': a path, not a name"),
        ("{elsewhere}/x", None, "a path, not a name"),
        ("..", None, "instance id '..': a path, not a name"),
        ("ok__id-1", "{elsewhere}/t.traj.json", "ok__id-1: its trajectory {elsewhere}/t.traj.json is outside"),
        ("ok__id-1", "../../elsewhere/t.traj.json", "its trajectory ../../elsewhere/t.traj.json is outside"),
    ],
)
def test_ids_and_paths_from_a_batch_never_leave_its_folder(
    demo_run, tmp_path: Path, instance_id: str, trajectory: str | None, said: str
) -> None:
    """Issue 32 §2: an instance id `../../x` or an absolute path in exit_statuses.yaml made `report --html` write
    x.html there, then crash. Now: one line, exit 2, nothing written anywhere."""
    _, page = demo_run
    elsewhere = tmp_path / "elsewhere"
    batch = tmp_path / "a" / "b" / "batch"
    instance_id, said = instance_id.format(elsewhere=elsewhere), said.format(elsewhere=elsewhere)
    info = {"exit_status": "submitted"} | ({"trajectory": trajectory.format(elsewhere=elsewhere)} if trajectory else {})
    batch.mkdir(parents=True)
    (batch / "exit_statuses.yaml").write_text(yaml.safe_dump({"instances": {instance_id: info}}))
    demo = page.with_name("d") / "run" / "demo.traj.json"
    for folder in {(batch / instance_id).resolve(), elsewhere}:  # real trajectories where the paths lead
        folder.mkdir(parents=True, exist_ok=True)
        for name in (f"{Path(instance_id).name}.traj.json", "t.traj.json"):
            (folder / name).write_bytes(demo.read_bytes())
    before = sorted(tmp_path.rglob("*"))
    done = cli("report", str(batch), "--html", str(tmp_path / "out" / "report.html"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: {batch / 'exit_statuses.yaml'}: ") and said in done.stderr
    assert sorted(tmp_path.rglob("*")) == before


def test_a_report_says_unpriced_for_a_run_of_no_price_and_for_a_part_of_one(tmp_path: Path) -> None:
    """A batch's rows said a dollar figure whatever the models' prices: $0.0000 for a run whose model had none (its
    cost unknown), and a run whose navigator had none said its driver's cost as if it were all."""
    prices = {"gpt-test": {"input": 1.0, "output": 1.0}}
    runs = {
        "a__x-1": ("gpt-test", {}, "$0.5000"),
        "b__y-1": ("gpt-free", {}, "unpriced"),
        "c__z-1": ("gpt-test", {"mode": "model", "model": "gpt-free"}, "$0.5000 + unpriced"),
    }
    statuses = {"instances": {i: {"exit_status": "submitted", "cost": 0.5 * (i != "b__y-1")} for i in runs}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    for instance, (model, navigator, _) in runs.items():
        config = {"model": {"prices": prices}, "navigator": navigator}
        (tmp_path / instance).mkdir()
        info = {"run_id": instance, "model": model, "config": config, "n_operations": 1}
        (tmp_path / instance / f"{instance}.traj.json").write_text(json.dumps({"info": info, "operations": []}))
    done = invoke("report", str(tmp_path), env={**os.environ, "COLUMNS": "200"})
    assert (done.returncode, done.stderr) == (0, "")
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in done.stdout.splitlines() if "__" in line]
    assert {row[0]: row[3] for row in cells} == {instance: said for instance, (_, _, said) in runs.items()}
    assert done.stdout.splitlines()[-1] == "3 of 3 instances shown; their total 3 steps, $1.0000 + unpriced"
    page = tmp_path / "report.html"
    assert invoke("report", str(tmp_path), "--html", str(page)).returncode == 0
    assert all(f">{said}</td>" in page.read_text() for _, _, said in runs.values())


def test_a_batch_of_one_one_step_run_says_its_counts_in_the_singular(tmp_path: Path) -> None:
    """`report --html` said `(+ 1 inspector pages)`, its page `1 instances`, `1 steps`, the run's page `1 operations`,
    `1 model calls`; the text report `1 of 1 instances shown; their total 1 steps`."""
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    model = agent_script.write_script(tmp_path / "s.yaml", [act("Nothing to do.", "submit")])
    batch = tmp_path / "batch"
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    run = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    assert cli(*run, "--output", str(batch / "a__x-1"), "--thread-id", "a__x-1").returncode == 0
    statuses = {"instances": {"a__x-1": {"exit_status": "submitted", "cost": 0.0}}}
    (batch / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    (batch / "eval").mkdir()
    (batch / "eval" / "report.json").write_text(json.dumps({"resolved_ids": [], "error_ids": ["a__x-1"]}))
    text = cli("report", str(batch))
    assert text.returncode == 0, text.stderr
    said = "1 of 1 instance shown; their total 1 step, $0.0000, 0 resolved, 0 not resolved, 1 evaluation error"
    assert text.stdout.splitlines()[-1] == said
    done = cli("report", str(batch), "--html", str(tmp_path / "out" / "report.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"1 of 1 instance → {tmp_path / 'out' / 'report.html'} (+ 1 inspector page)"
    totals = re.findall(r"<span[^>]*>(\d+ [a-z ]+)</span>", (tmp_path / "out" / "report.html").read_text())
    assert totals[:2] == ["1 instance", "0 resolved"] and {"1 evaluation error", "1 step"} <= set(totals)
    page = (tmp_path / "out" / "report_pages" / "a__x-1.html").read_text()
    facts = re.findall(r"<span(?: id=\"calls\")?>(\d+ [a-z ]+)</span>", page)
    assert facts == ["1 operation", "1 model call"]
