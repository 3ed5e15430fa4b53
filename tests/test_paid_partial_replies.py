"""A reply that streamed in part is paid for (the provider bills the prompt and what it sent), though never used: one
a dying server cut (retried or not) as one Ctrl-C stopped, recorded, charged and counted as an estimate; its prompt's
part the provider's cache held (the prefix it shares with the run's previous request) priced at the cache read
price. Against the loopback OpenAI-compatible server."""

from __future__ import annotations

import gzip
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, single_call
from conftest import make_git_repo
from in_process import invoke
from openai_server import HANG, CtrlCAtPiece, OpenAIServer, Reply

from llm_ide.budget import CostBudget
from llm_ide.call_policy import CallPolicy
from llm_ide.config import load_config
from llm_ide.errors import ModelError, install_signal_policy
from llm_ide.many_calls import call_n
from llm_ide.models import get_model
from llm_ide.pricing import Price

PRICE = Price(input=2.0, output=8.0, cache_read=0.2)
PRICES = {"gpt-test": {"input": PRICE.input, "output": PRICE.output, "cache_read": PRICE.cache_read}}
WORDS = " ".join(f"word{index}" for index in range(40))
SYSTEM = {"role": "system", "content": "You are careful. " * 200}
FIRST = [SYSTEM, {"role": "user", "content": "Fix calc.py."}]
SECOND = [*FIRST, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now the tests."}]


def chat_model(url: str, retries: int) -> Any:
    settings = {"max_retries": retries, "retry_base_delay": 0.0, "stream": True, "prices": PRICES}
    return get_model("gpt-test", load_config(model=settings).model, base_url=url)


def billed(record: dict[str, Any]) -> float:
    tokens = record["prompt_tokens"], record["response_tokens"], record["cache_read_tokens"]
    return PRICE.cost(*tokens)


@pytest.mark.parametrize("retried", [True, False])
def test_a_stream_a_dying_server_cut_is_recorded_and_charged_whether_retried_or_not(retried: bool) -> None:
    """Before: the cut attempts were neither in the calls log nor in the budget (the retry's reply alone was)."""
    replies: list[str | Reply] = [Reply(WORDS, cut=5), "whole"] if retried else [Reply(WORDS, cut=5)]
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=replies) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=1)
        if retried:
            assert policy.call(model, FIRST, kind="act", index=0)[0].text == "whole"
        else:
            with pytest.raises(ModelError, match="failed after 2 attempts"):
                policy.call(model, FIRST, kind="act", index=0)
    cut = records[:-1] if retried else records
    assert len(cut) == (1 if retried else 2) and len(server.requests) == 2
    for record in cut:
        assert (record["index"], record["finish_reason"], record["usage_estimated"]) == (0, "cut", True)
        assert record["response"] == " ".join(WORDS.split()[:5]) + " " and record["response_tokens"] > 0
        assert record["prompt_tokens"] > 100 and record["cost"] == pytest.approx(billed(record)) and record["cost"] > 0
    assert budget.spent == pytest.approx(sum(record["cost"] for record in records))
    if not retried:  # the second attempt sent the first's prompt again: its provider's cache held all of it
        assert [record["cache_read_tokens"] for record in cut] == [0, cut[1]["prompt_tokens"]]


@pytest.mark.parametrize("how", ["cut", "interrupted"])
def test_a_reply_paid_in_part_reads_from_the_cache_what_it_shares_with_the_previous_request(how: str) -> None:
    """Before: its whole prompt was priced uncached, though a provider's cache held all the previous request sent."""
    second = Reply(WORDS, cut=5) if how == "cut" else Reply(WORDS, pace=0.01)
    records: list[dict[str, Any]] = []
    with OpenAIServer(replies=["first", second, "again"]) as server:
        policy, model = CallPolicy(records.append), chat_model(server.url, retries=1)
        policy.call(model, FIRST, kind="act", index=0)
        model.listener = CtrlCAtPiece() if how == "interrupted" else None
        with pytest.raises(KeyboardInterrupt) if how == "interrupted" else nullcontext():
            policy.call(model, SECOND, kind="act", index=1)
    paid = records[1]
    assert (paid["finish_reason"], paid["usage_estimated"]) == (how, True)
    shared = sum(len(message["content"]) for message in FIRST) / sum(len(message["content"]) for message in SECOND)
    assert paid["cache_read_tokens"] == pytest.approx(shared * paid["prompt_tokens"], rel=0.05)
    assert paid["cost"] == pytest.approx(billed(paid)) and paid["cost"] < PRICE.cost(paid["prompt_tokens"], 0) / 2


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_without_usage_reads_from_the_cache_what_it_shares_as_a_cut_one_does(stream: bool) -> None:
    """A server that sends no usage (llama.cpp's streams): its tokens estimated, and (before: none) the prompt's prefix
    the previous request sent priced at the cache read price, as for a reply cut in its stream."""
    records: list[dict[str, Any]] = []
    with OpenAIServer(replies=["first", Reply(WORDS, usage=False)]) as server:
        policy, model = CallPolicy(records.append), chat_model(server.url, retries=0)
        model.stream = stream
        policy.call(model, FIRST, kind="act", index=0)
        policy.call(model, SECOND, kind="act", index=1)
    estimated = records[1]
    assert estimated["usage_estimated"] is True
    shared = sum(len(message["content"]) for message in FIRST) / sum(len(message["content"]) for message in SECOND)
    assert estimated["cache_read_tokens"] == pytest.approx(shared * estimated["prompt_tokens"], rel=0.05)
    assert estimated["cost"] == pytest.approx(billed(estimated))


def test_a_run_counts_a_cut_stream_in_its_cost_and_its_calls_log(tmp_path: Path) -> None:
    """A `llm-ide run` whose first reply's stream a dying server cut, then asked again: the run's cost and tokens
    (its trajectory's `model_stats`, the summary's line) count the cut call, as a discarded one, estimated."""
    replies = single_call(FIX_SCRIPT)
    with OpenAIServer(replies=[Reply(replies[0], cut=3), *replies]) as server:
        done = cut_run(tmp_path, server.url, retries=6)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"submitted after {len(replies)} model calls (+1 discarded)" in done.stdout
    with gzip.open(tmp_path / "out" / "t.calls.jsonl.gz", "rt") as log:
        calls = [json.loads(line) for line in log]
    assert (calls[0]["index"], calls[0]["finish_reason"], calls[0]["usage_estimated"]) == (0, "cut", True)
    stats = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]["model_stats"]
    assert (stats["api_calls"], stats["discarded_calls"], stats["estimated_calls"]) == (len(replies), 1, 1)
    assert stats["cost"] == pytest.approx(sum(call["cost"] for call in calls)) and calls[0]["cost"] > 0


def test_a_run_ended_by_a_cut_stream_says_which_of_its_tokens_are_estimated(tmp_path: Path) -> None:
    """One whole reply, then a stream the server cut and no retry: the summary's line said `(estimated)` of all its
    tokens (the one estimated call was as many as the run's calls, the discarded one left out of the count)."""
    replies = single_call(FIX_SCRIPT)
    with OpenAIServer(replies=[replies[0], Reply(replies[1], cut=3)]) as server:
        done = cut_run(tmp_path, server.url, retries=0)
    assert "model_error after 1 model call (+1 discarded)" in done.stdout, done.stdout + done.stderr
    assert "tokens (estimated for 1 call)" in done.stdout


def cut_run(tmp_path: Path, url: str, retries: int) -> Any:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    config = tmp_path / "c.yaml"
    model = {"stream": True, "retry_base_delay": 0.0, "max_retries": retries, "prices": PRICES}
    config.write_text(json.dumps({"environment": {"tools": []}, "model": model}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"LLM_IDE_CONFIG": "off"}
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)]
    run += ["--model", "gpt-test", "--base-url", url, "--output", str(tmp_path / "out"), "--thread-id", "t"]
    return invoke(*run, env=env)


@pytest.mark.parametrize("failing", [400, Reply(WORDS, cut=5)], ids=["refused", "cut"])
def test_the_replies_of_n_together_are_paid_when_one_of_them_fails(failing: int | Reply) -> None:
    """A sampler's n requests at the same time, one failing: before, the replies the others gave (and a cut one's
    part) were neither in the calls log nor in the budget, though the provider bills them."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=[WORDS, WORDS, failing]) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=0)
        with pytest.raises(ModelError):
            call_n(policy, model, FIRST, 3, kind="act", batched=False, index=4)
    assert len(records) == (2 if failing == 400 else 3) and len(server.requests) == 3
    assert {record["index"] for record in records} <= {4, 5, 6} and all(record["cost"] > 0 for record in records)
    assert budget.spent == pytest.approx(sum(record["cost"] for record in records)) and budget.reserved == 0


def interrupt_when_asked(server: OpenAIServer, asked: int) -> None:
    """Ctrl-C (SIGINT to the main thread) once the server has `asked` requests, none of them answered yet."""
    while len(server.requests) < asked:
        time.sleep(0.01)
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_ctrl_c_stopped_before_its_reply_began_is_paid_for_its_prompt(stream: bool) -> None:
    """Ctrl-C while the server read the prompt, no piece of the reply in yet: the provider bills the prompt it was
    sent. Before: the call was neither in the calls log nor in the budget."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=["first", HANG], hang_seconds=30) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=0)
        model.stream = stream
        policy.call(model, FIRST, kind="act", index=0)
        threading.Thread(target=interrupt_when_asked, args=(server, 2), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            policy.call(model, SECOND, kind="act", index=1)
    assert len(records) == 2, records
    paid = records[1]
    assert (paid["index"], paid["finish_reason"], paid["usage_estimated"]) == (1, "interrupted", True)
    assert (paid["response"], paid["response_tokens"]) == ("", 0) and paid["prompt_tokens"] > 100
    assert paid["cost"] == pytest.approx(billed(paid)) and paid["cost"] > 0
    assert budget.spent == pytest.approx(sum(record["cost"] for record in records)) and budget.reserved == 0


def test_a_retry_ctrl_c_stopped_before_its_reply_began_is_paid_as_the_cut_stream_before_it() -> None:
    """A stream a dying server cut, asked again, Ctrl-C before the retry's reply began: two requests paid, the cut
    one as cut, the retry as interrupted. Before: only the cut one, recorded as interrupted."""
    records: list[dict[str, Any]] = []
    with OpenAIServer(replies=[Reply(WORDS, cut=5), HANG], hang_seconds=30) as server:
        policy, model = CallPolicy(records.append), chat_model(server.url, retries=1)
        threading.Thread(target=interrupt_when_asked, args=(server, 2), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            policy.call(model, FIRST, kind="act", index=0)
    assert [record["finish_reason"] for record in records] == ["cut", "interrupted"]
    assert [record["response_tokens"] > 0 for record in records] == [True, False]


class InterruptAtRetry(logging.Handler):
    """Ctrl-C (SIGINT to the main thread, from a thread of its own) once the model waits to ask again."""

    def emit(self, record: logging.LogRecord) -> None:
        if "retry 1/1" in record.getMessage():
            threading.Thread(target=interrupt_in_pause, daemon=True).start()


def interrupt_in_pause() -> None:
    main = threading.main_thread().ident or 0
    while sys._current_frames()[main].f_code.co_name != "pause":
        time.sleep(0.01)
    signal.pthread_kill(main, signal.SIGINT)


def test_ctrl_c_in_the_wait_before_a_retry_pays_for_no_request_more() -> None:
    """A request refused (503, retry after 30 s), Ctrl-C in the wait: no request was out, none is paid for."""
    records: list[dict[str, Any]] = []
    refused = Reply(status=503, headers=(("retry-after", "30"),))
    handler, logger = InterruptAtRetry(), logging.getLogger("llm_ide.models")
    logger.addHandler(handler)
    try:
        with OpenAIServer(replies=[refused, "never asked"]) as server:
            policy, model = CallPolicy(records.append), chat_model(server.url, retries=1)
            with pytest.raises(KeyboardInterrupt):
                policy.call(model, FIRST, kind="act", index=0)
    finally:
        logger.removeHandler(handler)
    assert (records, len(server.requests)) == ([], 1)


def test_one_request_for_n_choices_ctrl_c_stopped_is_paid_for_its_prompt() -> None:
    """A sampler's one request for n choices, Ctrl-C while the server read its prompt: the provider bills the prompt
    once. Before: nothing was in the calls log nor in the budget."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=[HANG], hang_seconds=30) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=0)
        threading.Thread(target=interrupt_when_asked, args=(server, 1), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            call_n(policy, model, FIRST, 3, kind="act", index=4)
    assert server.requests[0].body["n"] == 3 and len(records) == 1, records
    paid = records[0]
    assert (paid["index"], paid["finish_reason"], paid["usage_estimated"]) == (4, "interrupted", True)
    assert (paid["response"], paid["response_tokens"]) == ("", 0) and paid["prompt_tokens"] > 100
    assert paid["cost"] == pytest.approx(billed(paid)) and paid["cost"] > 0
    assert budget.spent == pytest.approx(paid["cost"]) and budget.reserved == 0


def interrupt_with_one_out(server: OpenAIServer, heard: list[str], piece: str | None) -> None:
    """Ctrl-C (SIGINT to the main thread) once the n calls' requests are in and all but one have their reply, that
    one's `piece` of text come (None: nothing of it)."""
    calls = lambda: [thread for thread in threading.enumerate() if thread.name.endswith("(one)")]  # noqa: E731
    while not (len(server.requests) == 3 and len(calls()) == 1 and (piece is None or piece in "".join(heard))):
        time.sleep(0.01)
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


@pytest.mark.parametrize("stream", [True, False])
def test_the_requests_of_n_together_still_out_when_ctrl_c_came_are_paid(tmp_path: Path, stream: bool) -> None:
    """Ctrl-C while a sampler's n requests are under way, two replies in, the third's begun to stream (or not yet
    come whole): the provider bills them all, the third's prompt and what it streamed too. Before: the two in alone
    (and before those, none: the interrupt left the wait for the others)."""
    gate, heard = tmp_path / "never", []
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=[WORDS, WORDS, Reply("held back", gate=str(gate))]) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=0)
        model.stream, model.listener = stream, lambda progress: heard.append(progress.text)
        waiting = (server, heard, "held" if stream else None)
        threading.Thread(target=interrupt_with_one_out, args=waiting, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            call_n(policy, model, FIRST, 3, kind="act", batched=False, index=4)
        gate.touch()
    assert sorted(record["index"] for record in records) == [4, 5, 6], records
    stopped = [record for record in records if record.get("finish_reason") == "interrupted"]
    assert [record["response"] for record in records if record not in stopped] == [WORDS, WORDS]
    assert len(stopped) == 1 and stopped[0]["usage_estimated"] is True and stopped[0]["prompt_tokens"] > 100
    assert stopped[0]["response"].strip() == ("held" if stream else "")
    assert stopped[0]["cost"] == pytest.approx(billed(stopped[0])) and stopped[0]["cost"] > 0
    assert budget.spent == pytest.approx(sum(record["cost"] for record in records)) and budget.reserved == 0


def ctrl_c_as_the_call_ends(progress: Any) -> None:
    """A listener (the console's live line) that the Ctrl-C meets as it is told the call's end: the reply is whole."""
    if progress.kind == "end":
        raise KeyboardInterrupt


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_come_whole_just_before_ctrl_c_is_recorded_and_charged(stream: bool) -> None:
    """Ctrl-C as the call's end is told (its reply whole, its usage counted, not yet recorded). Before: neither in the
    calls log nor in the budget, though the provider bills all of it."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=[Reply(WORDS, input_tokens=2000, output_tokens=50)]) as server:
        policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=0)
        model.stream, model.listener = stream, ctrl_c_as_the_call_ends
        with pytest.raises(KeyboardInterrupt):
            policy.call(model, FIRST, kind="act", index=0)
    assert len(records) == 1, records
    whole = records[0]
    assert (whole["response"], whole["prompt_tokens"], whole["response_tokens"]) == (WORDS, 2000, 50)
    assert "usage_estimated" not in whole and "finish_reason" not in whole
    assert whole["cost"] == pytest.approx(PRICE.cost(2000, 50)) and budget.spent == pytest.approx(whole["cost"])


class InterruptAtRetries(logging.Handler):
    """Ctrl-C (SIGINT to the main thread) once `calls` calls wait to ask again: each said so as its wait began."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def emit(self, record: logging.LogRecord) -> None:
        if "retry 1/1" in record.getMessage():
            self.calls -= 1
            if not self.calls:
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


@pytest.mark.parametrize("stream", [True, False])
def test_ctrl_c_while_the_samplers_requests_wait_to_retry_pays_for_none(stream: bool) -> None:
    """A sampler's two requests at the same time, both refused (503, retry after 30 s), Ctrl-C while their threads
    wait to ask again: no request was out, none is paid for. Before: each was charged a prompt, as a request stopped."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    refused = Reply(status=503, headers=(("retry-after", "30"),))
    handler, logger = InterruptAtRetries(2), logging.getLogger("llm_ide.models")
    logger.addHandler(handler)
    try:
        with OpenAIServer(replies=[refused, refused, "never asked", "never asked"]) as server:
            policy, model = CallPolicy(records.append, budget), chat_model(server.url, retries=1)
            model.stream = stream
            with pytest.raises(KeyboardInterrupt):
                call_n(policy, model, FIRST, 2, kind="act", batched=False, index=4)
    finally:
        logger.removeHandler(handler)
    assert (records, len(server.requests)) == ([], 2)
    assert budget.spent == 0 and budget.reserved == 0


def ctrl_c_as_it_is_recorded(records: list[dict[str, Any]], signum: int) -> Any:
    """The calls log's record that Ctrl-C (or SIGTERM) meets as it is written: the signal to this process, then the
    record kept (unless the interrupt left the recorder first)."""

    def record(call: dict[str, Any]) -> None:
        os.kill(os.getpid(), signum)
        records.append(call)

    return record


@pytest.fixture
def signal_policy() -> Iterator[None]:
    """SIGTERM and SIGHUP as an llm-ide process has them (errors.Terminated), whatever an earlier test of this worker
    left there (Ray's init installs a SIGTERM handler that exits), and as they were after the test."""
    stopping = (signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in stopping}
    install_signal_policy()
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.usefixtures("signal_policy")
def test_a_reply_ctrl_c_met_as_it_was_recorded_is_recorded_and_charged(signum: int) -> None:
    """Ctrl-C (or SIGTERM) between the model client's return and the call's record: the reply, billed in full, was
    neither in the calls log nor in the budget (its reservation held). Now both, and the interrupt right after."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    with OpenAIServer(replies=[Reply(WORDS, input_tokens=2000, output_tokens=50)]) as server:
        policy, model = CallPolicy(ctrl_c_as_it_is_recorded(records, signum), budget), chat_model(server.url, 0)
        with pytest.raises(KeyboardInterrupt):
            policy.call(model, FIRST, kind="act", index=0)
    whole = pytest.approx(PRICE.cost(2000, 50))
    assert [(record["response"], record["cost"]) for record in records] == [(WORDS, whole)]
    assert budget.spent == whole and budget.reserved == 0


@pytest.mark.parametrize("batched", [True, False], ids=["one request", "n requests"])
def test_a_samplers_replies_ctrl_c_met_as_they_were_recorded_are_recorded_and_charged(batched: bool) -> None:
    """A sampler's three replies come, Ctrl-C as the first is recorded: before, that one and those after it were
    neither in the calls log nor in the budget (its reservation held), though the provider bills them all."""
    records: list[dict[str, Any]] = []
    budget = CostBudget(10.0)
    replies = [Reply(choices=("a", "b", "c"))] if batched else ["a", "b", "c"]
    with OpenAIServer(replies=replies) as server:
        policy, model = CallPolicy(ctrl_c_as_it_is_recorded(records, signal.SIGINT), budget), chat_model(server.url, 0)
        with pytest.raises(KeyboardInterrupt):
            call_n(policy, model, FIRST, 3, kind="act", batched=batched, index=4)
    assert [record["index"] for record in records] == ([4] if batched else [4, 5, 6]), records
    assert all(record["cost"] > 0 for record in records) and "finish_reason" not in records[0]
    assert budget.spent == pytest.approx(sum(record["cost"] for record in records)) and budget.reserved == 0
