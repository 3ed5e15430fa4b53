"""Loaded by `debugger start` into the pytest it debugs (`-p llm_ide_debugger.pytest_plugin`): a failing test
enters post-mortem debugging in the same session."""

import pytest

from llm_ide_debugger import server


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):  # noqa: ANN001, ANN201 (pytest hook)
    if server.SESSION is not None:
        server.SESSION.pdb.arm_pending_breaks()


def pytest_exception_interact(node, call, report):  # noqa: ANN001, ANN201 (pytest hook)
    session = server.SESSION
    if session is None or call.excinfo is None:
        return
    session.pdb.message("\n" + call.excinfo.exconly())
    session.post_mortem(f"{node.nodeid} failed in {report.when}", call.excinfo.tb)
