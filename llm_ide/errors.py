"""One set of exit statuses, one error hierarchy, one signal policy.

Every error we raise on purpose is an `LlmIdeError`: it reaches the user as one line, carries the exit status a run
ends with when it stops the run, and the CLI's exit code (2: a bad input, told before anything runs).
"""

from __future__ import annotations

import logging
import math
import re
import signal
import threading
from enum import StrEnum

from llm_ide.credentials import MASK, credentials_in

SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://")  # where a URL starts in a word
_said: set[tuple[str, ...]] = set()
_said_lock = threading.Lock()


def warn_once(logger: logging.Logger, key: tuple[str, ...], message: str) -> None:
    """Warns `message` the first time the process meets `key` (what holds for the process, said for its first run)."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    logger.warning(message)


class ExitStatus(StrEnum):
    """How a run ended (the trajectory's `info.exit_status`, exit_statuses.yaml)."""

    SUBMITTED = "submitted"
    STEP_LIMIT = "step_limit"
    COST_LIMIT = "cost_limit"
    TIME_LIMIT = "time_limit"
    FORMAT_ERROR = "format_error"
    MODEL_ERROR = "model_error"
    ENVIRONMENT_ERROR = "environment_error"
    INTERRUPTED = "interrupted"
    TURN_LIMIT = "turn_limit"  # a navigator turn limit: its turns, the driver's turns between reviews, review rounds
    AWAITING_ANSWER = "awaiting_navigator"  # a person's answer is pending (a human navigator's; it resumes with it)
    ERROR = "error"
    NOT_STARTED = "not_started"  # a batch's instance it never started (exit_statuses.yaml; no run has it)

    @property
    def finished(self) -> bool:
        """A finished run is not resumed: its thread is done. Interrupted, model and other errors resume."""
        return self not in {
            ExitStatus.MODEL_ERROR,
            ExitStatus.INTERRUPTED,
            ExitStatus.ERROR,
            ExitStatus.AWAITING_ANSWER,
            ExitStatus.NOT_STARTED,
        }

    @property
    def failed(self) -> bool:
        """The run could not do its work (not a limit it reached, not an interruption): a batch of nothing but
        failures exits non-zero."""
        return self in {
            ExitStatus.FORMAT_ERROR,
            ExitStatus.MODEL_ERROR,
            ExitStatus.ENVIRONMENT_ERROR,
            ExitStatus.ERROR,
        }


class LlmIdeError(Exception):
    """An error told to the user in one line."""

    exit_status = ExitStatus.ERROR
    exit_code = 1


class UsageError(LlmIdeError):
    """A bad input of the user (option, file, URL, settings): exit code 2, before anything runs. The credentials its
    line holds (a URL's password) are masked: the Python API and Studio give the line as it is raised."""

    exit_code = 2

    def __init__(self, line: object = "", *rest: object) -> None:
        super().__init__(re.sub(r"\S+", masked, line) if isinstance(line, str) else line, *rest)


def masked(word: re.Match[str]) -> str:
    """A word with the credentials it holds masked, a URL's quoted or after `=` too (`'…'`, `--base-url=…`); in
    their place (`:…@`, `=…`): a short password masked everywhere in the line made it unreadable."""
    text = word.group()
    starts = {0, *(match.start() for match in SCHEME.finditer(text))}
    for secret in {secret for start in starts for secret in credentials_in(text[start:])}:
        before, after = next((b, a) for b, a in ((":", "@"), ("=", ""), ("", "")) if b + secret + a in text)
        text = text.replace(before + secret + after, before + MASK + after)
    return text


class ConfigError(UsageError, ValueError):
    """A configuration file or value that does not validate; the message names the file and the key path."""


class ThreadMismatchError(UsageError, ValueError):
    """The thread names a run of another task: going on would mix two tasks in one history."""


class PreflightError(UsageError, ValueError):
    """What stops a run before it starts (a ValueError too: LangGraph's server shows its message to the client)."""


class CombinationError(UsageError):
    """Variants that cannot go together (or a variant's settings section taken already), told in one line."""


class CheckpointError(UsageError):
    """The checkpoint store cannot be opened (unknown scheme, unreachable database, unwritable file)."""


class ModelError(LlmIdeError):
    """The model cannot answer; the run ends with exit status `model_error`."""

    exit_status = ExitStatus.MODEL_ERROR


class ModelAuthError(ModelError, UsageError):
    """Authentication, permission, not-found or missing-key failure: never retried."""


class StoreLost(LlmIdeError):
    """The checkpoint store went out of reach under a run (its database stopped, its network cut): the run stops at
    its last checkpoint, resumable once the store is back; a batch stops there, its instances not run resumed by the
    same command (`summary`: what the batch had done, when a batch raises it)."""

    exit_status = ExitStatus.INTERRUPTED

    def __init__(self, message: str, summary: object = None) -> None:
        super().__init__(message)
        self.summary = summary


class EnvironmentFailure(LlmIdeError):
    """The environment cannot go on (container gone, engine unreachable): the run ends with `environment_error`."""

    exit_status = ExitStatus.ENVIRONMENT_ERROR


KEPT = "the patch kept is the run's last worktree snapshot"


class RepositoryLost(EnvironmentFailure):
    """The repository's git directory was deleted or replaced under the run (a command, a reproduction script): the
    run ends with `environment_error`, its patch the last worktree snapshot it holds (`patch`)."""

    def __init__(self, message: str, patch: str = "") -> None:
        super().__init__(message)
        self.patch = patch

    @classmethod
    def away(cls, what: str) -> RepositoryLost:
        """The repository's folder itself (`what`) deleted, moved away or closed to us."""
        return cls(f"{what} was deleted, moved away or made unreadable by a command of the run: {KEPT}")


class Submitted(LlmIdeError):
    """The agent submitted: its patch is the result."""

    exit_status = ExitStatus.SUBMITTED


class StepLimit(LlmIdeError):
    """The run made `agent.step_limit` operations."""

    exit_status = ExitStatus.STEP_LIMIT


def usd(amount: float) -> str:
    """Dollars as every cost and limit is shown: 4 decimals, and below $0.0001 its first two significant digits (a
    limit of $0.0012 is not $0.00, a cost of $0.00004 not $0.0000)."""
    places = 4 if not amount or abs(amount) >= 1e-4 else 1 - math.floor(math.log10(abs(amount)))
    return f"${amount:.{places}f}"


class CostLimit(LlmIdeError):
    """The run spent `agent.cost_limit` (or `agent.token_limit` tokens, whatever the price)."""

    exit_status = ExitStatus.COST_LIMIT


class TimeLimit(LlmIdeError):
    """The run's `agent.wall_time_limit` passed."""

    exit_status = ExitStatus.TIME_LIMIT


class AwaitingAnswer(LlmIdeError):
    """A person's answer is pending (a human navigator's question): the run resumes with it."""

    exit_status = ExitStatus.AWAITING_ANSWER


class ModelTimeLimit(ModelError, TimeLimit):
    """The run's wall-time limit passed while the model call was under way: the run ends with `time_limit`."""

    exit_status = ExitStatus.TIME_LIMIT


class BudgetSpent(CostLimit):
    """No room is left in a shared budget for another model call: the run ends with exit status `cost_limit`."""

    exit_status = ExitStatus.COST_LIMIT


class FormatError(ValueError):
    """A model's reply that cannot be used: the model is told why and asked again (not an ending by itself)."""


class FormatErrors(LlmIdeError):
    """The model's replies could not be used `agent.max_format_errors` times in a row: `format_error`; the message
    ends with the last one's reason (no later call says it: the inspector reads it there)."""

    exit_status = ExitStatus.FORMAT_ERROR
    LAST = "; the last: "

    @classmethod
    def after(cls, count: int, limit: int, reason: str) -> FormatErrors:
        said = f"{count} replies in a row could not be used (agent.max_format_errors: {limit})"
        return cls(said + cls.LAST + (reason.strip().split("\n", 1)[0] or "(no reason)"))


class TurnLimit(LlmIdeError):
    """A variant's turn limit (the navigator's turns, review rounds): the run ends with `turn_limit`."""

    exit_status = ExitStatus.TURN_LIMIT


class OutputFolderLost(LlmIdeError):
    """The run's output folder disappeared (deleted by hand, by a cleanup job): the run stops, resumable."""

    exit_status = ExitStatus.INTERRUPTED


def ended(error: LlmIdeError) -> dict[str, object]:
    """The state update with which `error` ends a run inside the graph: its exit status, and its message if any
    (`ending` tells both)."""
    status, message = ending(error)
    return {"exit_status": status, **({"error": message} if message else {})}


LIMITS = frozenset({ExitStatus.STEP_LIMIT, ExitStatus.COST_LIMIT, ExitStatus.TIME_LIMIT})  # a higher one goes on


def status_of(value: str | None) -> ExitStatus:
    """The exit status a run's state or trajectory holds; none at all: it ended in an error of the program."""
    return ExitStatus(value) if value else ExitStatus.ERROR


def ending(error: BaseException) -> tuple[ExitStatus, str]:
    """How what stopped a run ends it: its exit status and the line that says why. An error of ours carries its
    status; Ctrl-C, SIGTERM or SIGHUP interrupt it (resumable); anything else is an error of the program."""
    if isinstance(error, LlmIdeError):
        return error.exit_status, str(error)
    if isinstance(error, KeyboardInterrupt):
        how = f"signal {error.signum}" if isinstance(error, Terminated) else "the user"
        return ExitStatus.INTERRUPTED, f"interrupted by {how}"
    return crashed(error)


def beside(first: str, then: str) -> str:
    """The line of a run ended by two errors: its first cause, what failed after it beside it (never alone)."""
    return f"{first} (then {then})" if first and then not in first else first or then


def not_started() -> dict[str, str]:
    """exit_statuses.yaml's record of an instance its batch never started."""
    return {"exit_status": str(ExitStatus.NOT_STARTED)}


def crashed(error: BaseException) -> tuple[ExitStatus, str]:
    """A crash around a run (an instance of a batch that did not get to end its run): an error, retried later."""
    return ExitStatus.ERROR, f"{type(error).__name__}: {error}"


class Terminated(SystemExit, KeyboardInterrupt):
    """SIGTERM or SIGHUP: caught wherever Ctrl-C is (the run ends `interrupted`, resumable, its environment removed);
    uncaught, the process exits with 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def install_signal_policy() -> None:
    """SIGTERM and SIGHUP, while at their default (which would skip `finally` and atexit), raise `Terminated` in the
    main thread. Handlers the caller installed are left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, _terminate):
            signal.signal(signum, _terminate)
