"""The one pipe the program's and pdb's output go through, with the sync marks written at every pdb prompt."""

import os
import re
import threading

HEAD_BYTES = 20000
TAIL_BYTES = 20000
MARK = re.compile(rb"\x1edbg-sync-(\d+)\x1e")
MARK_BODY = b"dbg-sync-"


def _could_be_mark(tail: bytes) -> bool:
    """`tail` (what follows a trailing \\x1e) may be the start of a sync mark cut by a read boundary."""
    if len(tail) <= len(MARK_BODY):
        return MARK_BODY.startswith(tail)
    return tail.startswith(MARK_BODY) and tail[len(MARK_BODY) :].isdigit()


class Output:
    """Reads the pipe in a thread; keeps the head and tail of what arrived since the last take()."""

    def __init__(self, read_fd: int, condition: threading.Condition) -> None:
        self._fd = read_fd
        self._condition = condition
        self._head = bytearray()
        self._tail = bytearray()
        self._elided = 0
        self._rest = b""
        self.mark = 0
        threading.Thread(target=self._read, name="debugger-output", daemon=True).start()

    def _read(self) -> None:
        while True:
            data = os.read(self._fd, 65536)
            if not data:
                return
            with self._condition:
                self._feed(self._rest + data)
                self._condition.notify_all()

    def _feed(self, data: bytes) -> None:
        position = 0
        for match in MARK.finditer(data):
            self._append(data[position : match.start()])
            self.mark = max(self.mark, int(match.group(1)))
            position = match.end()
        rest = data[position:]
        cut = rest.rfind(b"\x1e")
        if cut >= 0 and _could_be_mark(rest[cut + 1 :]):
            self._append(rest[:cut])
            self._rest = rest[cut:]
        else:
            self._append(rest)
            self._rest = b""

    def _append(self, data: bytes) -> None:
        room = HEAD_BYTES - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        self._tail += data
        if len(self._tail) > TAIL_BYTES:
            drop = len(self._tail) - TAIL_BYTES
            del self._tail[:drop]
            self._elided += drop

    def take(self) -> str:
        """Call with the condition held."""
        text = self._head.decode("utf-8", "replace")
        if self._elided:
            text += f"\n[... {self._elided} bytes of output elided ...]\n"
        text += self._tail.decode("utf-8", "replace")
        self._head, self._tail, self._elided = bytearray(), bytearray(), 0
        return text
