"""The choice among attempts verified by execution (Agentless's: keep the patches that pass the reproduction, then
those with the fewest regressions, then let a model judge). Every attempt's patch runs in a clean environment (the
base commit with the patch applied) against every reproduction (the given ones and each attempt's validated ones) and
against the repository's tests that passed before and touch the files it edits. What ran is kept in the record, so
a later call (a new attempt, a new reproduction, a resumed run) runs only what is missing."""

from __future__ import annotations

import copy
import hashlib
import time
from typing import Any

from llm_ide.errors import LlmIdeError
from llm_ide.reproduction.regression import edited_files, passed_tests, source_stems, touching
from llm_ide.reproduction.script import UNVERIFIED, Script, key, reproduction_script
from llm_ide.terminal import plural
from llm_ide.verification import Finished, Verified


def patch_key(patch: str) -> str:
    return hashlib.sha1(patch.encode("utf-8")).hexdigest()[:12]


def pooled(given: list[Script], runs: list[Finished]) -> dict[str, Script]:
    """Every reproduction once (by content): the given ones, then each attempt's validated ones under its number."""
    tests: dict[str, Script] = {}
    for item in given:
        tests.setdefault(key(item), {**item, "label": item["name"]})
    for run in runs:
        for item in ((run.info.get("reproduction") or {}).get("scripts")) or []:
            generated = item["source"] == "generated"
            name = f"attempt{run.index}_{item['name']}" if generated else item["name"]
            label = f"attempt {run.index}: {item['name']}" if generated else item["name"]
            tests.setdefault(
                key(item), {"name": name, "content": item["content"], "source": item["source"], "label": label}
            )
    return tests


def baseline(bench: Any, wanted: dict[str, list[str]], record: dict[str, Any]) -> None:
    """The test files each patch's regression run needs (chosen on the base commit) and which of their tests pass
    there, for the patches and files not yet in the record."""
    selections, passed = record.setdefault("selections", {}), record.setdefault("baseline", {})
    todo = {pk: edited for pk, edited in wanted.items() if pk not in selections if source_stems(edited)}
    selections.update((pk, []) for pk in wanted if pk not in selections and pk not in todo)  # no source file edited
    if not todo:
        return
    limit = bench.settings.reproduction.regression_files
    with bench.clean("base", "") as env:
        for pk, edited in todo.items():
            selections[pk] = touching(env, edited, limit)
        files = sorted({path for pk in todo for path in selections[pk] if path not in passed})
        if files:
            result = passed_tests(env, files, bench.settings)
            for path in files:
                passed[path] = [test for test in result["passed"] if test.split("::")[0] == path]
            unrun = record.setdefault("baseline_unrun", {})
            unrun.update(result["unrun"])
            for path, why in result["unrun"].items():  # nothing to compare a patch's run with: said, never a pass
                bench.emit(f"verify: could not verify regressions of {path} (its tests did not run on the base: {why})")


def check_patch(bench: Any, run: Finished, tests: dict[str, Script], record: dict[str, Any]) -> bool:
    """What the patch has not been run against yet, run in one clean environment; whether anything ran."""
    entry = record.setdefault("patches", {}).setdefault(patch_key(run.patch), {"reproductions": {}, "seconds": 0.0})
    missing = [test_key for test_key in tests if test_key not in entry["reproductions"]]
    files = record.get("selections", {}).get(patch_key(run.patch))
    regression = bench.settings.reproduction.regression and files and "regression" not in entry
    if not missing and not regression:
        return False
    started = time.monotonic()
    entry.pop("error", None)
    bench.emit(
        f"verify: attempt {run.index}'s patch against {plural(len(missing), 'reproduction')}"
        + (f" and {plural(len(files), 'test file')}" if regression else "")
    )
    try:
        with bench.clean(f"attempt{run.index}", run.patch) as env:
            for test_key in missing:
                entry["reproductions"][test_key] = reproduction_script(env, tests[test_key], bench.settings)
            if regression:
                after = passed_tests(env, files, bench.settings)
                before = {test for path in files for test in record["baseline"].get(path, [])}
                unrun = record.get("baseline_unrun", {})
                entry["regression"] = {
                    "files": files,
                    "passed_before": len(before),
                    "failing": sorted(before - set(after["passed"])),
                    "unverified": {path: unrun[path] for path in files if path in unrun},
                }
    except LlmIdeError as error:  # the patch does not apply, the environment does not start: nothing it passed
        entry["error"] = str(error)
    entry["seconds"] = round(entry["seconds"] + time.monotonic() - started, 3)
    return True


def verdict_of(runs: dict[str, Any], test_key: str) -> str | None:
    return (runs.get(test_key) or {}).get("verdict")


def facts_of(entry: dict[str, Any], tests: dict[str, Script]) -> tuple[dict[str, Any], tuple[int, int, int]]:
    """What the runs of a patch found, and its rank: (whether something could not be verified, reproductions not
    resolved, regressions). A check that could not run is never a pass: an attempt with one ranks below those whose
    checks all ran."""
    runs = entry["reproductions"]
    unverified = [
        f"{tests[k]['label']}: {runs[k]['reason']}" for k in tests if runs.get(k, {}).get("verdict") == UNVERIFIED
    ]
    failing = [
        f"{tests[k]['label']} ({runs[k]['verdict']}, exit {runs[k]['returncode']})" if k in runs else tests[k]["label"]
        for k in tests
        if k not in runs or runs[k]["verdict"] not in ("resolved", UNVERIFIED)
    ]
    facts: dict[str, Any] = {"verification failed": entry["error"]} if entry.get("error") else {}
    if tests:
        resolved = sum(1 for k in tests if verdict_of(runs, k) == "resolved")
        facts["reproductions resolved (clean run)"] = f"{resolved} of {len(tests)}"
        if failing:
            facts["reproductions not resolved"] = "; ".join(failing)
    regression = entry.get("regression")
    if regression is not None:
        shown = ", ".join(regression["failing"][:5]) + (" …" if len(regression["failing"]) > 5 else "")
        checked = [path for path in regression["files"] if path not in regression.get("unverified", {})]
        facts["regressions (clean run)"] = (
            f"{len(regression['failing'])} of {regression['passed_before']} tests that passed before"
            f" ({', '.join(checked) or 'no file whose tests ran'})" + (f": {shown}" if shown else "")
        )
        unverified += [f"regressions of {path}: {why}" for path, why in regression.get("unverified", {}).items()]
    if unverified:
        facts["could not verify"] = "; ".join(unverified)
    return facts, (int(bool(unverified)), len(failing), len(regression["failing"]) if regression else 0)


def verify_runs(bench: Any, given: list[Script], runs: list[Finished], record: dict[str, Any]) -> Verified | None:
    """Facts and a rank (reproductions not resolved, regressions) for each run with a patch."""
    record = copy.deepcopy(record)  # the driver's state is not changed in place
    tests = pooled(given, runs)
    with_patch = [run for run in runs if run.patch.strip()]
    own = bench.settings.reproduction
    if not own.verify or not with_patch or not (tests or own.regression):
        return None
    if own.regression:
        baseline(bench, {patch_key(run.patch): edited_files(run.patch) for run in with_patch}, record)
    checked = [run.index for run in with_patch if check_patch(bench, run, tests, record)]
    verified = Verified(record)
    for run in with_patch:
        entry = record["patches"][patch_key(run.patch)]
        verified.facts[run.index], verified.ranks[run.index] = facts_of(entry, tests)
        if (reasons := verified.facts[run.index].get("could not verify")) and run.index in checked:
            bench.emit(f"verify: attempt {run.index}: could not verify {reasons}")
    return verified
