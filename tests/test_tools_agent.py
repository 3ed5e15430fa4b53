"""The debugger as the agent sees it: installed by the run, listed in Tool Usage, driven through `bash` actions, and
the code its output names marked as accessed. No debugger-specific code is involved on the agent's side."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, act, reflect, write_script
from conftest import BASE_IMAGE, make_git_repo, require_docker

from llm_ide.config import load_config
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory


@pytest.mark.docker
@pytest.mark.slow
def test_agent_drives_the_debugger_in_a_container(tmp_path: Path) -> None:
    require_docker()
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    script = write_script(
        tmp_path / "script.yaml",
        [
            act(
                "Run the failing test under the debugger.", "bash", command="debugger start -m unittest tests.test_cart"
            ),
            reflect(False, "The session is paused at the start of unittest."),
            act(
                "Stop in the loop of Cart.total and look at the values.",
                "bash",
                command="debugger-commands 'b shop/cart.py:14' c 'p price, quantity' where",
            ),
            reflect(False, "total adds the price but never multiplies it by the quantity (4)."),
            act(
                "Multiply by the quantity.",
                "edit",
                path="shop/cart.py",
                old="            total += price\n",
                new="            total += price * quantity\n",
            ),
            reflect(False, "Fixed."),
            act("Done.", "submit"),
        ],
    )
    config = load_config("default", environment={"tools": ["debugger"]})
    run_id = f"debugger-agent-{uuid.uuid4().hex[:8]}"  # its containers counted by it, not another session's
    result = run_task(
        "Cart.total ignores quantities.",
        model=script,
        settings=config,
        output_dir=tmp_path / "out",
        run_id=run_id,
        repo=repo,
        environment="docker",
        image=BASE_IMAGE,
    )
    traj = load_trajectory(result.trajectory_path)
    assert traj["info"]["exit_status"] == "submitted"
    first_prompt = traj["model_calls"][0]["prompt"]
    assert "## Tool Usage\n### `debugger`\nA live pdb session you drive command by command" in first_prompt
    started, session = traj["operations"][0]["observation"], traj["operations"][1]["observation"]
    assert "[debugger] Started -m unittest tests.test_cart (pid " in started
    assert "(Pdb) b shop/cart.py:14\nBreakpoint 1 at /testbed/shop/cart.py:14\n" in session
    assert "(Pdb) c\n> shop/cart.py:14 in total()\n-> total += price\n(Pdb) p price, quantity\n(1.5, 4)\n" in session
    assert session.endswith(
        "(Pdb) where\n  [... 14 frame(s) of pdb/pytest/unittest internals ...]\n"
        "  tests/test_cart.py:11 in test_total_counts_quantities()\n-> self.assertEqual(cart.total(), 16.0)\n"
        "> shop/cart.py:14 in total()\n-> total += price"
    )
    chunks = {(chunk["class_name"], chunk["function"]): chunk for chunk in traj["code_context"]}
    # `where` named both frames: the operation that ran it accessed the test method and Cart.total
    assert chunks[("Cart", "total")]["activity"]["accessed"][1] >= 1
    assert chunks[("CartTest", "test_total_counts_quantities")]["activity"]["accessed"][1] >= 1
    assert "+            total += price * quantity\n" in traj["info"]["submission"]
    leftovers = ["docker", "ps", "-aq", "--filter", f"label=llm-ide.run-id={run_id}"]
    assert subprocess.run(leftovers, capture_output=True, text=True, check=True).stdout == ""
