"""pdb as the session drives it: commands from clients, `path:line` stack entries, pdb/pytest internals hidden."""

import bdb
import io
import linecache
import pdb
import reprlib
import sys
import typing

if typing.TYPE_CHECKING:
    from llm_ide_debugger.server import Session

SKIPPED_MODULES = ["llm_ide_debugger", "llm_ide_debugger.*", "_pytest.*", "pluggy", "pluggy.*"]


class Channel:
    """pdb's stdin: each readline() is a prompt, answered with the next command a client sent."""

    def __init__(self, session: "Session") -> None:
        self._session = session

    def readline(self) -> str:
        return self._session.next_command()


class SessionPdb(pdb.Pdb):
    def __init__(self, session: "Session", stdin: Channel, stdout: io.TextIOBase) -> None:
        pdb.Pdb.__init__(self, stdin=stdin, stdout=stdout, skip=SKIPPED_MODULES, nosigint=True, readrc=False)
        self.prompt = ""
        self.session = session
        self.skip_first_stop = False
        self.pending_breaks = []  # type: list[tuple[str, int]]
        self.silent_breaks = set()  # type: set[str]

    def interaction(self, frame, traceback):  # noqa: ANN001, ANN201 (pdb's signature)
        if self.skip_first_stop and traceback is None:
            self.skip_first_stop = False  # pytest: run on, untraced, to the start of the selected test
            self.set_continue()
            return None
        return pdb.Pdb.interaction(self, frame, traceback)

    def arm_pending_breaks(self) -> None:
        """Sets the breakpoints at the start of the selected tests and turns tracing on (pytest calls this just
        before a test runs, so collection and plugin loading run at full speed, untraced)."""
        for filename, line in self.pending_breaks:
            if self.set_break(self.canonic(filename), line, temporary=True) is None:
                self.silent_breaks.add(str(self.get_breaks(self.canonic(filename), line)[-1].number))
        if self.pending_breaks:
            self.pending_breaks = []
            sys.settrace(self.trace_dispatch)

    def do_clear(self, arg):  # noqa: ANN001, ANN201
        if arg.strip() in self.silent_breaks:  # our own breakpoint at the start of a test, hit once
            self.silent_breaks.discard(arg.strip())
            self.clear_bpbynumber(arg.strip())
            return None
        if arg:
            return pdb.Pdb.do_clear(self, arg)
        breakpoints = [bp for bp in bdb.Breakpoint.bpbynumber if bp]
        self.clear_all_breaks()  # no "Clear all breaks?" question: nobody could answer it
        for bp in breakpoints:
            self.message(f"Deleted {bp}")
        return None

    do_cl = do_clear

    def format_stack_entry(self, frame_lineno, lprefix=": "):  # noqa: ANN001, ANN201
        """`path:line in function()` (path relative to the project root) instead of pdb's `path(line)function()`."""
        frame, lineno = frame_lineno
        filename = self.canonic(frame.f_code.co_filename)
        entry = f"{self.session.display_path(filename)}:{lineno} in {frame.f_code.co_name or '<lambda>'}()"
        if "__return__" in frame.f_locals:
            entry += " -> " + reprlib.repr(frame.f_locals["__return__"])
        line = linecache.getline(filename, lineno, frame.f_globals) if lineno is not None else ""
        return entry + (lprefix + line.strip() if line else "")

    def print_stack_trace(self, count=None):  # noqa: ANN001, ANN201 (Python 3.13 passes `where N`)
        stack = self.stack if not count else (self.stack[-count:] if count > 0 else self.stack[:-count])
        hidden = 0
        try:
            for frame_lineno in stack:
                if frame_lineno[0] is not self.curframe and self.session.is_internal(frame_lineno[0]):
                    hidden += 1
                    continue
                self._report_hidden(hidden)
                hidden = 0
                self.print_stack_entry(frame_lineno)
            self._report_hidden(hidden)
        except KeyboardInterrupt:
            pass

    def _report_hidden(self, hidden: int) -> None:
        if hidden:
            self.message(f"  [... {hidden} frame(s) of pdb/pytest/unittest internals ...]")
