"""The run page in real headless Chromium (Debian's chromium + chromium-driver): the tree and its panel, the keyboard,
sampled candidates, denied and discarded calls, unpriced runs, the reproduction tests' calls, any text shown
exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import agent_script
import pytest
from agent_script import act, reflect
from conftest import make_git_repo
from inspector_support import cli, reproduction_run, text_of
from openai_server import OpenAIServer, Reply

from llm_ide import run_task
from llm_ide.config import load_config
from llm_ide.run.trajectory import load_trajectory
from llm_ide.state.operations import OperationNode, reasoning_chain


def test_run_page_draws_the_tree_marks_failed_alternatives_and_opens_nodes(browser, demo_run) -> None:
    from selenium.webdriver.common.by import By

    data, page = demo_run
    browser.get(page.as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    operations = data["operations"]
    assert len(nodes) == len(operations) == 5
    chain = {node.id for node in reasoning_chain([OperationNode(**op) for op in operations])}
    failed = [n.get_attribute("data-key") for n in browser.find_elements(By.CSS_SELECTOR, "#tree .node.failed")]
    assert failed == [f"0:{op['id']}" for op in operations if op["id"] not in chain] == ["0:1"]
    assert browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:1"] .cross').is_displayed()
    assert browser.find_element(By.ID, "panel-body").get_attribute("hidden") is not None
    for node, operation in zip(nodes, operations, strict=True):
        node.click()
        assert text_of(browser.find_element(By.ID, "panel-observation")) == (operation["observation"] or "—")
        assert text_of(browser.find_element(By.ID, "panel-title")).startswith(f"[{operation['id']}] ")
        assert text_of(browser.find_element(By.ID, "panel-lessons")) == (operation["lessons"] or "—")
    calls = browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call")
    assert [text_of(c.find_element(By.CSS_SELECTOR, "summary")).split(":")[0] for c in calls] == ["#4 act"]
    recorded = next(call for call in data["model_calls"] if call["index"] == 4)
    assert text_of(calls[0].find_element(By.CSS_SELECTOR, "pre.prompt")) == recorded["prompt"]
    assert text_of(calls[0].find_element(By.CSS_SELECTOR, "pre.response")) == recorded["response"]
    nodes[1].click()
    browser.find_element(By.CSS_SELECTOR, "#panel-thought a.ref").click()
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#heat tr.highlight th")
    assert [text_of(h) for h in highlighted] == ["calc/stats.py:10-17 median"]
    nodes[2].click()  # its thought cites lines 17 and 14: the second reference
    browser.find_elements(By.CSS_SELECTOR, "#panel-thought a.ref")[0].click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#heat tr")) == len(data["code_context"])
    assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in text_of(browser.find_element(By.ID, "patch"))
    assert text_of(browser.find_element(By.ID, "exit-status")) == "submitted"
    assert browser.get_log("browser") == []


def test_mini_swe_agent_trajectory_renders_as_a_chain(browser, shared_dir: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / "pallets__flask-5014.traj.json"
    messages = json.loads(source.read_text())["messages"]
    assert cli("inspect", str(source), "--html", str(tmp_path / "mini.html")).returncode == 0
    browser.get((tmp_path / "mini.html").as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    assert len(nodes) == sum(1 for m in messages if m["role"] == "assistant") == 20
    assert browser.find_elements(By.CSS_SELECTOR, "#tree .node.failed") == []
    nodes[0].click()
    assert text_of(browser.find_element(By.ID, "panel-observation")) == messages[3]["content"]
    assert "ls -R" in text_of(browser.find_element(By.ID, "panel-action"))
    assert "if not name:" in text_of(browser.find_element(By.ID, "patch"))
    assert browser.get_log("browser") == []


def test_sampled_candidates_show_in_the_panel_and_the_text_tree(browser, tmp_path: Path) -> None:
    """A run with action sampling (k=3): the node that ran is marked sampled; its panel lists every candidate, the
    one that ran first marked, with the discriminator's reason; `inspect --full` lists them too."""
    from agent_script import BUGGY_FILES, TEST_COMMAND, act, reflect
    from agent_script import write_script as script_file
    from conftest import make_git_repo
    from selenium.webdriver.common.by import By

    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    view = act("Read the total.", "view", path="shop/cart.py", start_line=1, end_line=15)
    tests = act("Run the tests.", "bash", command=TEST_COMMAND)
    responses = [view, tests, view, "The tests say more.\n<choice>2</choice>", reflect(False, "Fails.")]
    responses += [act("Done.", "submit")] * 3
    settings = load_config("default", environment={"tools": []}, sampling={"k": 3})
    result = run_task(
        "Cart.total ignores quantities.",
        model=script_file(tmp_path / "script.yaml", responses),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="sampled",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
    )
    page = tmp_path / "page.html"
    assert cli("inspect", str(result.trajectory_path), "--html", str(page)).returncode == 0
    browser.get(page.as_uri())
    first = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:0"]')
    assert "sampled" in first.get_attribute("class").split()
    first.click()
    assert browser.find_element(By.ID, "panel-sampling").is_displayed()
    items = [text_of(item) for item in browser.find_elements(By.CSS_SELECTOR, "#panel-candidates li")]
    assert items[0].startswith("2× view ") and items[1].startswith("✓ ran · 1× bash ") and len(items) == 2
    assert text_of(browser.find_element(By.ID, "panel-choice")) == "ask_colleagues · 3 samples, 1 choosing call"
    assert "The tests say more." in text_of(browser.find_element(By.CSS_SELECTOR, "#panel-candidates pre"))

    text = cli("inspect", "--full", str(result.trajectory_path))
    assert text.returncode == 0, text.stderr
    assert "(sampled: 2 distinct of 3, ask_colleagues)" in text.stdout
    assert "· 2× view" in text.stdout and "✓ 1× bash" in text.stdout


HOSTILE = (
    "<!-- badges -->\n</script><script>document.title = 'pwned'</script>\nline\u2028separator\u2029 & &amp; <b>x</b>\n"
)


def test_any_text_of_a_run_round_trips_through_its_page(browser, tmp_path: Path) -> None:
    """Issue 32 §1: a README with `<!-- badges -->` broke the page's script (the tree drew, no node opened). An
    observation, a thought, a reflection and a prompt holding `<!--`, `</script>`, U+2028/U+2029 and `&` show exactly
    as recorded; nothing of them runs."""
    from selenium.webdriver.common.by import By

    repo = make_git_repo(tmp_path / "repo", {"README.md": HOSTILE})
    steps = [
        act("Read it <!-- here --> </script>.", "bash", command="cat README.md"),
        reflect(False, "Read \u2028 it."),
    ]
    model = agent_script.write_script(tmp_path / "s.yaml", [*steps, act("Done & </script>.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    out = tmp_path / "out"
    args = ["--repo", str(repo), "--task", HOSTILE, "--model", model, "--config", str(tmp_path / "c.yaml")]
    run = cli("run", *args, "--output", str(out), "--thread-id", "h")
    assert run.returncode == 0, run.stderr
    data = load_trajectory(out / "h.traj.json")
    operations = data["operations"]
    assert all(part in operations[0]["observation"] for part in ("<!-- badges -->", "</script>", "\u2028", "&amp;"))
    page = tmp_path / "h.html"
    assert cli("inspect", str(out / "h.traj.json"), "--html", str(page)).returncode == 0
    browser.get(page.as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    assert len(nodes) == len(operations) == 2
    for node, operation in zip(nodes, operations, strict=True):
        node.click()
        assert text_of(browser.find_element(By.ID, "panel-observation")) == operation["observation"]
        assert text_of(browser.find_element(By.ID, "panel-thought")) == operation["thought"]
        for call in browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call"):
            index = int(text_of(call.find_element(By.CSS_SELECTOR, "summary")).split()[0].lstrip("#"))
            recorded = next(c for c in data["model_calls"] if c["index"] == index)
            assert text_of(call.find_element(By.CSS_SELECTOR, "pre.prompt")) == recorded["prompt"]
            assert HOSTILE.strip() in recorded["prompt"]
    assert browser.title != "pwned" and browser.get_log("browser") == []


def test_an_unpriced_runs_panel_says_its_nodes_and_calls_unpriced_not_zero(browser, tmp_path: Path) -> None:
    """A model without a price, served on loopback: the page's header said unpriced, its panel `cost $0.0000`; its
    tokens, what such a run is measured by, were said nowhere on the page."""
    from selenium.webdriver.common.by import By

    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--thread-id", "t"]
    run += ["--config", str(config)]
    with OpenAIServer(replies=agent_script.single_call(agent_script.FIX_SCRIPT)) as server:
        done = cli(*run, "--model", "local/free-model", "--base-url", server.url, "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert cli("inspect", str(tmp_path / "out" / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    browser.get((tmp_path / "p.html").as_uri())
    assert text_of(browser.find_element(By.ID, "cost")) == "unpriced"
    said = re.search(r"^submitted after \d+ model calls, (\d+\+\d+ tokens), unpriced$", done.stdout, re.M)
    assert said is not None and text_of(browser.find_element(By.ID, "tokens")) == said.group(1)  # (none: no figure)
    for node in browser.find_elements(By.CSS_SELECTOR, "#tree .node"):
        node.click()
        facts = text_of(browser.find_element(By.ID, "panel-facts"))
        calls = [text_of(call) for call in browser.find_elements(By.CSS_SELECTOR, "#panel-calls summary")]
        assert "cost unpriced" in facts and calls and all(call.endswith(" out, unpriced") for call in calls), calls
    assert browser.get_log("browser") == []


def test_a_page_says_the_discarded_calls_its_cost_counts(browser, tmp_path: Path) -> None:
    """A stream cut mid-reply, asked again: the cost in the header counts the cut call, and the header said only the
    calls of the run's history (`4 model calls`, the console's `(+1 discarded)` nowhere). Then the header said it, and
    neither the calls table nor the first operation's calls showed it: 5 calls said, 4 rows. Both show it, marked."""
    from selenium.webdriver.common.by import By

    replies = agent_script.single_call(agent_script.FIX_SCRIPT)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    prices = {"gpt-test": {"input": 1.0, "output": 2.0}}
    model = {"stream": True, "retry_base_delay": 0.0, "max_retries": 3, "prices": prices}
    (config := tmp_path / "c.yaml").write_text(json.dumps({"environment": {"tools": []}, "model": model}))
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)]
    with OpenAIServer(replies=[Reply(replies[0], cut=3), *replies]) as server:
        done = cli(*run, "--model", "gpt-test", "--base-url", server.url, "--output", str(tmp_path), "--thread-id", "t")
    assert f"after {len(replies)} model calls (+1 discarded)" in done.stdout, done.stdout + done.stderr
    assert cli("inspect", str(tmp_path / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    calls = re.search(r"<span[^>]*>(\d+ model calls[^<]*)</span>", (tmp_path / "p.html").read_text())
    assert calls is not None and calls.group(1) == f"{len(replies)} model calls (+1 discarded)"
    recorded = load_trajectory(tmp_path / "t.traj.json")["model_calls"]
    assert [call["index"] for call in recorded] == list(range(len(replies)))  # the cut call is in the log alone

    text = cli("inspect", str(tmp_path / "t.traj.json"))
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.stdout.splitlines() if "│ act" in line]
    assert [(row[0], row[-1]) for row in rows] == [("0", "its reply was cut off mid-way; asked again")] + [
        (str(index), "") for index in range(len(replies))
    ]
    assert rows[0][4] != rows[1][4] and "discarded (paid, not in the run's history)" in text.stdout
    browser.get((tmp_path / "p.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:0"]').click()
    shown = [text_of(c) for c in browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call summary")]
    assert len(shown) == 2 and shown[0].startswith("#0 act: ") and shown[1].startswith("#0 act: ")
    why = "its reply was cut off mid-way; asked again"
    assert shown[0].endswith(f" · discarded (paid, not in the run's history): {why}")
    assert "discarded" not in shown[1] and browser.get_log("browser") == []
    costs = re.findall(r"cost \$([\d.]+)", text_of(browser.find_element(By.ID, "panel-facts")))
    assert float(costs[0]) == pytest.approx(recorded[0]["cost"] + float(rows[0][5][1:]), abs=1e-4)  # both paid


def test_the_node_a_keyboard_reaches_is_drawn_focused(browser, demo_run: tuple[dict, Path]) -> None:
    """Tab reaches the tree's nodes and Enter opens one, but the node focused looked as any other (no outline); the
    references in a thought were links no keyboard could reach."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(demo_run[1].as_uri())
    look = "const s = getComputedStyle(document.querySelector(`#tree .node[data-key='${arguments[0]}'] .row`));"
    look += "return [s.fill, s.stroke];"
    unfocused = browser.execute_script(look, "0:0")
    for _ in range(10):
        if browser.execute_script("return document.activeElement.dataset.key") == "0:0":
            break
        ActionChains(browser).send_keys(Keys.TAB).perform()
    assert browser.execute_script(look, "0:0") != unfocused == browser.execute_script(look, "0:1")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    assert text_of(browser.find_element(By.ID, "panel-title")) == "[0] view"
    browser.execute_script("document.querySelector('#panel-thought a.ref').focus()")  # its thought's reference
    assert browser.execute_script("return document.activeElement.className") == "ref"  # (a link without a target: no)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#heat tr.highlight th")
    assert [text_of(h) for h in highlighted] == ["calc/stats.py:10-17 median"]


def test_an_operation_the_navigator_denied_says_so_not_an_exit_code(browser, tmp_path: Path) -> None:
    """The navigator refused an edit before it ran: its panel said `exit code -1` (the placeholder of a command that
    never ran), the text tree `(failed alternative)`, neither that nor why it was denied."""
    from agent_script import CART_FIX, CART_SUBMIT, CART_VIEW
    from selenium.webdriver.common.by import By

    cheat = act("Make the test expect 11.5.", "edit", path="tests/test_cart.py", old="16.0", new="11.5")
    reason = "Changing the test hides the bug: fix Cart.total instead."
    navigator = ['<view>{"path": "shop/cart.py"}</view>', "<plan>1. Fix Cart.total.</plan>"]
    navigator += [f"<deny>{reason}</deny>", "<approve>As planned.</approve>"]
    driver = [CART_VIEW, reflect(False, "Sums price only."), cheat, CART_FIX, reflect(False, "Fixed."), CART_SUBMIT]
    nav = {"mode": "model", "model": agent_script.write_script(tmp_path / "n.yaml", navigator)}
    settings = load_config("default", environment={"tools": []}, navigator=nav, agent={"single_call": False})
    model = agent_script.write_script(tmp_path / "d.yaml", driver)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    result = run_task("Fix Cart.total.", model=model, settings=settings, output_dir=tmp_path, run_id="t", repo=repo)
    operations = load_trajectory(result.trajectory_path)["operations"]
    assert operations[1]["returncode"] == -1 and operations[1]["denied"] == {"reason": reason, "by": "model"}
    said = f"denied by the navigator (model): {reason}"

    text = cli("inspect", str(result.trajectory_path))
    assert text.returncode == 0, text.stderr
    denied = next(line for line in text.stdout.splitlines() if "[1] edit" in line)
    assert denied.endswith(f"(not run: {said})") and "✗" in denied and "(failed alternative)" not in denied
    assert "not run" not in text.stdout.replace(denied, "")
    assert cli("inspect", str(result.trajectory_path), "--html", str(tmp_path / "p.html")).returncode == 0
    browser.get((tmp_path / "p.html").as_uri())
    facts = {}
    for node in browser.find_elements(By.CSS_SELECTOR, "#tree .node"):
        node.click()
        facts[node.get_attribute("data-key")] = text_of(browser.find_element(By.ID, "panel-facts"))
    assert facts["0:1"].endswith(f" · not run: {said}") and "exit code" not in facts["0:1"]
    assert all("not run" not in said for key, said in facts.items() if key != "0:1")
    assert "exit code 0" in facts["0:0"] and browser.get_log("browser") == []


def test_the_calls_that_wrote_the_reproduction_tests_are_no_operations(browser, tmp_path: Path) -> None:
    """The two calls that wrote the reproduction tests, before the first step, were drawn under operation [0] as if
    part of it (its panel: three calls, its cost theirs too); they are apart, before the tree."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    calls = load_trajectory(reproduction_run(tmp_path))["model_calls"]
    kinds = {call["index"]: call["kind"] for call in calls}
    assert list(kinds.values()) == ["write_reproduction"] * 2 + ["act"] * 3
    browser.get((tmp_path / "p.html").as_uri())

    def shown(calls: list) -> list[str]:
        return [text_of(call.find_element(By.CSS_SELECTOR, "summary")).split(":")[0] for call in calls]

    for key, index in (("0:0", 2), ("0:1", 3), ("0:2", 4)):
        browser.find_element(By.CSS_SELECTOR, f'#tree .node[data-key="{key}"]').click()
        assert shown(browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call")) == [f"#{index} act"]
    before = browser.find_element(By.ID, "before-steps")
    said = "Reproduction tests written before the first step: 2 model calls"
    assert text_of(before.find_element(By.CSS_SELECTOR, "summary")) == said
    before.find_element(By.CSS_SELECTOR, "summary").click()
    # the calls are drawn by the details' toggle event, a task queued after the click: waited for
    written = WebDriverWait(browser, 30).until(lambda _: before.find_elements(By.CSS_SELECTOR, "details.call"))
    assert shown(written) == ["#0 write_reproduction", "#1 write_reproduction"]
    for box, call in zip(written, calls, strict=False):
        assert text_of(box.find_element(By.CSS_SELECTOR, "pre.response")) == call["response"]
    assert browser.get_log("browser") == []
