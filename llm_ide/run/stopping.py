"""Ctrl-C reaches the main thread only. Runs in other threads are told through their events and stop at the next one,
but a command that prints nothing sends none: `Commands` knows which threads are in a command (from its start and end
events) and raises KeyboardInterrupt in them, as Ctrl-C does in a run of the main thread: the command's process group
ends, its step is not saved, and the resumed run runs it again."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Flag(Protocol):
    def is_set(self) -> bool: ...


class Commands:
    """The threads whose run is in a command now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[int] = set()

    def note(self, event: Any) -> None:
        """A run's event, told in the thread the run works in: a command's start or end."""
        progress = getattr(event, "command", None) if event.kind == "command" else None
        if progress is None or progress.kind == "output":
            return
        with self._lock:
            if progress.kind == "start":
                self._threads.add(threading.get_ident())
            else:
                self._threads.discard(threading.get_ident())

    def interrupt(self) -> int:
        """KeyboardInterrupt in each other thread in a command, at its next Python instruction (a command's output
        loop looks every 50 ms); how many (the calling thread's own command has the Ctrl-C itself)."""
        with self._lock:
            others = self._threads - {threading.get_ident()}
            for ident in others:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(KeyboardInterrupt))
            self._threads -= others
        return len(others)

    @contextmanager
    def interrupted_when(self, stop: Flag, poll: float) -> Iterator[None]:
        """For a run whose Ctrl-C comes as a flag, not a signal (a Ray task's): `stop` looked at every `poll` seconds
        from a thread of its own; once set, the threads in a command are interrupted there."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(poll):
                if stop.is_set():
                    self.interrupt()
                    return

        watcher = threading.Thread(target=watch, name="llm-ide-stop-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()
