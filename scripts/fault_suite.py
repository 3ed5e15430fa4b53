#!/usr/bin/env python3
"""Fault suite (issue 10), in one go: series of random SIGKILLs (local, Postgres checkpoints, docker, a 2-worker
batch; at random moments and at random failpoints, each run resumed until it ends and compared with an uninterrupted
one), then the corruption and full-disk cases, hostile inputs, misbehaving model endpoints and secret probes (the
tests that build those faults for real, run by pytest; every file that exists is run).

Prints each case, survived/total per category, and ends with
`RESULT kills=…/… corruption=…/… bad_input=…/… endpoint=…/… secrets=…/…`.

    python scripts/fault_suite.py [--seed N] [--local 8] [--postgres 4] [--docker 3] [--batch 3]

"Survived" for a kill: the same operations and model calls as an uninterrupted run, each command's effect on the
worktree exactly once (a command the kill interrupted runs again on the worktree put back as it was before it), the
patch intact, no container left.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_kills import run_kills  # noqa: E402

CATEGORIES = ["kills", "corruption", "bad_input", "endpoint", "secrets"]
# pytest node ids (file::name prefix) per category; files that do not exist (another branch's) are left out
PYTEST_CASES = {
    "kills": [  # targeted: at exact failpoints, and two processes on one thread
        "tests/test_durability.py::test_kill",
        "tests/test_durability.py::test_killed_after",
        "tests/test_durability.py::test_postgres",
        "tests/test_durability.py::test_second_process",
        "tests/test_batch_durability.py::test_batch_killed",
        "tests/test_resume.py",
        "tests/test_docker_durability.py",
        "tests/test_durability.py::test_a_command_killed_half_way",
        "tests/test_process_containment.py",
    ],
    "corruption": [
        "tests/test_durability.py::test_corrupt_checkpoint",
        "tests/test_durability.py::test_truncated_trajectory",
        "tests/test_durability.py::test_an_empty_object_line",
        "tests/test_durability.py::test_full_disk",
        "tests/test_durability.py::test_read_only",
        "tests/test_durability.py::test_output_folder_deleted",
        "tests/test_batch_durability.py::test_wrong_shaped_preds",
        "tests/test_batch_durability.py::test_corrupt_exit_statuses",
        "tests/test_batch_durability.py::test_preds_survive_a_full_disk",
        "tests/test_batch_durability.py::test_batch_on_a_full_disk",
    ],
    "bad_input": [
        "tests/test_endpoint_faults.py::test_hostile_bytes",
        "tests/test_endpoint_faults.py::test_every_prompt_stays_within_budget",
        "tests/test_containment.py",
        "tests/test_containment_patch.py",
        "tests/test_bad_input.py",
        "tests/test_future.py",
        "tests/test_errors.py::test_a_checkpoint_store_that_cannot_be_opened",
    ],
    "endpoint": [
        "tests/test_endpoint_faults.py::test_slow_drip",
        "tests/test_endpoint_faults.py::test_retry_after",
        "tests/test_endpoint_faults.py::test_200",
        "tests/test_endpoint_faults.py::test_impossible_usage",
        "tests/test_endpoint_faults.py::test_implausible_usage",
        "tests/test_endpoint_faults.py::test_token_limit",
        "tests/test_models.py::test_rate_limit_then_success",
        "tests/test_models.py::test_transient_failure",
        "tests/test_models.py::test_connection_refused",
        "tests/test_models.py::test_auth_and_not_found",
    ],
    "secrets": ["tests/test_secrets.py"],
}


class Tally:
    def __init__(self) -> None:
        self.cases: dict[str, list[tuple[str, bool, str]]] = {name: [] for name in CATEGORIES}
        self.skipped: dict[str, int] = dict.fromkeys(CATEGORIES, 0)

    def record(self, category: str, name: str, survived: bool, detail: str = "") -> None:
        self.cases[category].append((name, survived, detail))
        mark = "ok  " if survived else "FAIL"
        print(f"  {mark} [{category}] {name}{': ' + detail if detail and not survived else ''}", flush=True)

    def score(self, category: str) -> str:
        cases = self.cases[category]
        return f"{sum(ok for _, ok, _ in cases)}/{len(cases)}"


def pytest_category(category: str, tally: Tally, docker: bool) -> None:
    """Run the category's tests (those whose files exist here); each test case is a fault case."""
    selected = [spec for spec in PYTEST_CASES[category] if (ROOT / spec.split("::")[0]).exists()]
    whole = [spec for spec in selected if "::" not in spec]
    named = [spec for spec in selected if "::" in spec]
    runs = [whole] if whole else []
    if named:
        files = sorted({spec.split("::")[0] for spec in named})
        runs.append([*files, "-k", " or ".join(spec.split("::")[1] for spec in named)])
    for args in runs:
        for file, name, problem in pytest_cases(args, docker):
            if not any(spec == file or f"{file}::{name}".startswith(spec) for spec in selected):
                continue  # -k matched a test of another category in the same file
            if problem is None:
                tally.skipped[category] += 1
            else:
                tally.record(category, f"{file}::{name}", not problem, problem)


def pytest_cases(args: list[str], docker: bool) -> list[tuple[str, str, str | None]]:
    """(file, test, problem) of each test pytest ran: problem '' when it passed, None when it was skipped."""
    with tempfile.TemporaryDirectory(prefix="fault-pytest-") as tmp:
        report = Path(tmp) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args]
        if not docker:
            command += ["-m", "not docker"]
        subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if not report.exists():
            return [(" ".join(args), "(pytest did not run)", "no report")]
        found = []
        for case in ET.parse(report).getroot().iter("testcase"):
            file = case.get("classname", "").replace(".", "/") + ".py"
            failure = case.find("failure") if case.find("failure") is not None else case.find("error")
            if case.find("skipped") is not None:
                problem = None
            elif failure is not None:
                problem = ((failure.get("message") or "failed").splitlines() or ["failed"])[0][:200]
            else:
                problem = ""
            found.append((file, case.get("name", ""), problem))
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    for kind, default in (("local", 8), ("postgres", 4), ("docker", 3), ("batch", 3)):
        parser.add_argument(f"--{kind}", type=int, default=default, help=f"kill trials with {kind} (default {default})")
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.randrange(10**6)
    rng = random.Random(seed)
    print(f"fault suite, seed {seed}", flush=True)
    tally = Tally()
    counts = {kind: getattr(options, kind) for kind in ("local", "postgres", "docker", "batch")}
    docker = counts["docker"] > 0 and docker_ready()
    if counts["docker"] and not docker:
        print("  (no Docker engine or base image: the docker series is left out)")
        counts["docker"] = 0
    with ExitStack() as stack:
        url = None
        if counts["postgres"]:
            url = postgres(stack)
            if url is None:
                print("  (no PostgreSQL server binaries: the Postgres series is left out)")
        print("kills:", flush=True)
        run_kills(rng, counts, tally.record, url)
    for category in CATEGORIES:
        print(f"{category}:" if category != "kills" else "kills (targeted):", flush=True)
        pytest_category(category, tally, docker)
    print()
    for category in CATEGORIES:
        skipped = f" ({tally.skipped[category]} skipped: not runnable here)" if tally.skipped[category] else ""
        print(f"{category:<11} {tally.score(category):>7} survived{skipped}")
    print("RESULT " + " ".join(f"{category}={tally.score(category)}" for category in CATEGORIES))


def docker_ready() -> bool:
    from conftest import BASE_IMAGE

    try:
        return subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def postgres(stack: ExitStack) -> str | None:
    from pg_server import find_bin_dir, postgres_server

    if find_bin_dir() is None:
        return None
    return stack.enter_context(postgres_server())


if __name__ == "__main__":
    main()
