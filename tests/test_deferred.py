"""llm_ide/deferred.py: a deferred package imports as an empty module whose submodules import as before; its
`__init__` runs once, at the first other name asked of it, from any thread; the command line defers what LangGraph's
import would otherwise run in every `llm-ide` process (langsmith's API types, LangGraph's server client, trio), and
leaves the OpenAI SDK's aiohttp client and httpx's own program out."""

from __future__ import annotations

import fcntl
import gc
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import isolated_environ

from llm_ide.deferred import DeferredInit
from llm_ide.run.outputs import LOOP_GC_THRESHOLD, settled_heap

PACKAGE = {
    "deferme/__init__.py": """
        from counted import runs
        runs.append(1)
        from .part import PART
        WHOLE = PART + 1
        """,
    "deferme/part.py": "PART = 41\n",
    "counted.py": "runs = []\n",
}


DEFERRING = """
import sys
from llm_ide.deferred import DeferredInit
sys.meta_path.insert(0, DeferredInit(frozenset({"deferme"})))
"""


def run_python(folder: Path, code: str, deferring: str = DEFERRING) -> subprocess.CompletedProcess[str]:
    """`code` in a Python of its own in `folder`, after `deferring` (by default: `deferme` deferred)."""
    command = [sys.executable, "-c", deferring + textwrap.dedent(code)]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)


AFTER_CONFIG_SHOW = """
import atexit, gc, json, sys, traceback
passes = []
gc.callbacks.append(lambda phase, info: passes.append(info["generation"]) if phase == "stop" else None)
before = gc.get_threshold()
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))  # registered first: runs last
from llm_ide.cli import app
passes.clear()  # what the command line's own module imports (typer, rich) comes before
try:
    app(["config", "show", "agent.step_limit"])
except SystemExit:
    pass
print("== gc passes")
print(len(passes) <= 5, gc.get_threshold() == before, before[0], len(passes))
for name, probe in json.loads(sys.argv[1]).items():
    print(f"== {name}", flush=True)
    try:
        exec(probe, {})
    except Exception:
        traceback.print_exc(file=sys.stdout)
print("== exit", flush=True)


class Cycle:
    def __del__(self):
        print("finalized", flush=True)


left = Cycle()
left.itself = left
del left
"""

PROBES = {
    "langsmith": """
        import sys
        import langgraph.graph
        print(sorted(name for name in sys.modules if name.startswith("langsmith.types")))
        print("langgraph_sdk.client" in sys.modules, [name for name in sys.modules if name.startswith("trio.")])
        from langsmith.types import Run
        from langsmith.types.run import Run as Direct
        print(Run is Direct, len([name for name in sys.modules if name.startswith("langsmith.types.")]) > 100)
        """,
    "openai types": """
        import sys
        from llm_ide.config import load_config
        from llm_ide.models import get_model
        model = get_model("local-model", load_config("default").model, "http://127.0.0.1:9/v1")
        responses = [name for name in sys.modules if name.startswith("openai.types.responses.")]
        azure = "langchain_openai.chat_models.azure" in sys.modules
        built = "eval_create_params" in vars(sys.modules["openai.types"])
        print(type(model.chat).__name__, len(responses) < 40, azure, built)
        import langchain_openai
        import openai.types
        from openai.types.completion_usage import CompletionUsage
        from openai.types.responses import Response
        from openai.types.responses.response import Response as Direct
        print(langchain_openai.ChatOpenAI is type(model.chat), openai.types.CompletionUsage is CompletionUsage)
        print(Response is Direct, langchain_openai.AzureChatOpenAI.__module__)
        print(len([name for name in sys.modules if name.startswith("openai.types.responses.")]) > 100)
        """,
    "httpx program": """
        import sys
        import httpx
        print(httpx.Client.__module__, [name for name, module in sys.modules.items()
                                     if module and name.startswith(("httpx._main", "pygments"))])
        try:
            httpx.main()
        except SystemExit as exit:
            print(exit.code)
        """,
    **{
        f"aiohttp {sdk}": f"""
        import importlib.util
        import sys
        import {sdk}
        from langchain_{sdk} import {chat}
        model = {chat}(model="m", api_key="sk-test", {arguments})
        installed = importlib.util.find_spec("aiohttp") is not None
        print(installed, "aiohttp" in sys.modules, "aiohttp" in str(type(model.{client}).__mro__).lower())
        try:
            {sdk}.DefaultAioHttpClient()
        except RuntimeError as error:
            print(error)
        """
        for sdk, chat, arguments, client in [
            ("openai", "ChatOpenAI", 'base_url="http://127.0.0.1:9/v1"', "async_client._client"),
            ("anthropic", "ChatAnthropic", "", "_async_client._client"),
        ]
    },
}


@pytest.fixture(scope="session")
def after_config_show(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> dict[str, list[str]]:
    """What a Python of its own printed after the command line's `config show` (with its own deferring): the young
    generation passes counted as it ran, then each probe's lines (a probe asks for more than those before it, and its
    own checks of what is not imported yet see theirs as well), then what its exit said. Made once per session, for
    all xdist workers: a process that imports the OpenAI and Anthropic SDKs costs ~5 s of CPU."""
    saved = session_cache / "deferred-probes.json"
    with (session_cache / "deferred-probes.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            folder = tmp_path_factory.mktemp("deferred")
            probes = json.dumps({name: textwrap.dedent(probe) for name, probe in PROBES.items()})
            command = [sys.executable, "-c", AFTER_CONFIG_SHOW, probes]
            env = isolated_environ(tmp_path_factory, session_cache)
            done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            sections: dict[str, list[str]] = {"": []}
            for line in done.stdout.splitlines():
                if line.startswith("== "):
                    sections[line[3:]] = []
                else:
                    sections[next(reversed(sections))].append(line)
            saved.write_text(json.dumps(sections))
    return json.loads(saved.read_text())


@pytest.fixture
def package(tmp_path: Path) -> Path:
    (tmp_path / "deferme").mkdir()
    for name, text in PACKAGE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_a_deferred_package_runs_its_init_once_at_the_first_name_asked_from_any_thread(package: Path) -> None:
    done = run_python(
        package,
        """
        import threading
        import deferme
        from counted import runs
        from deferme.part import PART
        print(runs, PART, "WHOLE" in vars(deferme))
        barrier, seen = threading.Barrier(4), []
        def ask():
            barrier.wait()
            seen.append(deferme.WHOLE)
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(len(runs), seen, "__getattr__" in vars(deferme), type(deferme.__loader__).__name__)
        try:
            deferme.nothing
        except AttributeError as error:
            print(error)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[] 41 False",
        "1 [42, 42, 42, 42] False SourceFileLoader",
        "module 'deferme' has no attribute 'nothing'",
    ]


@pytest.mark.parametrize(
    ("init", "expected"),
    [
        (
            "import deferme\nX = deferme.X\n",
            "AttributeError: partially initialized module 'deferme' has no attribute 'X'",
        ),
        ("raise ValueError('broken')\n", "ValueError: broken"),
    ],
)
def test_an_init_that_asks_for_itself_or_fails_fails_as_a_plain_import_would(
    package: Path, init: str, expected: str
) -> None:
    (package / "deferme/__init__.py").write_text(init)
    done = run_python(
        package,
        """
        import deferme
        try:
            deferme.X
        except Exception as error:
            print(f"{type(error).__name__}: {error}", "deferme" in sys.modules)
        """,
    )
    assert done.stdout.splitlines() == [f"{expected} False"], done.stderr


def test_a_module_that_is_not_a_package_or_not_named_is_found_as_ever(package: Path) -> None:
    finder = DeferredInit(frozenset({"counted", "nowhere"}))
    assert finder.find_spec("counted", [str(package)]) is None  # a plain module: nothing to defer
    assert finder.find_spec("nowhere", [str(package)]) is None
    assert finder.find_spec("deferme", [str(package)]) is None  # not named


def test_the_command_line_leaves_langsmiths_api_types_unbuilt_until_asked(
    after_config_show: dict[str, list[str]],
) -> None:
    assert after_config_show["langsmith"] == [
        "['langsmith.types', 'langsmith.types.run_select_field']",
        "False []",  # langgraph_sdk's client, trio's modules (where installed)
        "True True",
    ]


def test_the_command_line_builds_the_openai_sdks_api_types_a_model_does_not_use_only_when_asked(
    after_config_show: dict[str, list[str]],
) -> None:
    """A model of an OpenAI-compatible endpoint imports `ChatOpenAI` and the SDK's client: their packages' `__init__`s
    (~900 API models, Azure's classes) run at the first name asked of them, and the names are those a plain import
    gives."""
    assert after_config_show["openai types"] == [
        "ChatOpenAI True False False",
        "True True",
        "True langchain_openai.chat_models.azure",
        "True",
    ]


def test_the_command_line_leaves_httpxs_own_program_out(after_config_show: dict[str, list[str]]) -> None:
    """httpx's `__init__` imports its command-line client (rich's syntax highlighting, pygments) for the `httpx`
    program: left out, the model's httpx is whole and `httpx.main` says what it says where its `cli` extra is
    missing."""
    assert after_config_show["httpx program"] == [
        "httpx []",
        "The httpx command line client could not run because the required dependencies were not installed.",
        "Make sure you've installed everything with: pip install 'httpx[cli]'",
        "1",
    ]


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_command_line_leaves_the_sdks_aiohttp_client_out(after_config_show: dict[str, list[str]], sdk: str) -> None:
    """Where aiohttp is installed (here: swebench's modal), each SDK would import it; left out, the SDK says what it
    says where aiohttp is missing, and the model's async client is an httpx one."""
    if importlib.util.find_spec(f"langchain_{sdk}") is None:  # (importorskip would import it here: ~1.5 s)
        pytest.skip(f"langchain_{sdk} is not installed")
    assert after_config_show[f"aiohttp {sdk}"] == [
        "True False False",
        "To use the aiohttp client you must have installed the package with the `aiohttp` extra",
    ]


def test_a_commands_start_up_is_collected_rarely_and_the_thresholds_are_put_back(
    after_config_show: dict[str, list[str]],
) -> None:
    """`config show` imports the settings, the variants and LangGraph (~200,000 objects that stay): the young
    generation passes that walk them are counted (~250 with Python's own thresholds)."""
    [passes] = after_config_show["gc passes"]
    assert passes.split()[:3] == ["True", "True", "700"], passes


def test_a_commands_process_frees_its_garbage_at_exit_and_freezes_the_rest(
    after_config_show: dict[str, list[str]],
) -> None:
    """At exit the command line collects once, as the interpreter would, then freezes what is alive: the garbage a
    command left is finalized as before, and the interpreter's passes as it tears the modules down walk nothing."""
    assert after_config_show["exit"] == ["finalized", "frozen at exit: True"]


@pytest.mark.parametrize("frozen_by_caller", [True, False])
def test_a_runs_loop_settles_the_heap_and_gives_it_back_as_it_found_it(frozen_by_caller: bool) -> None:
    """The loop freezes what is alive and collects the young generation rarely; a caller's own freeze (a server's
    after its imports) is left as it was, not undone with the loop's."""
    gc.freeze() if frozen_by_caller else gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        with settled_heap():
            inside = (gc.get_threshold()[0], gc.get_freeze_count() > 0)
        after = (gc.get_threshold(), gc.get_freeze_count() > 0)
    finally:
        gc.unfreeze()  # as the worker's heap was: a frozen one costs each run a walk of it (get_freeze_count)
    assert (inside, after) == ((LOOP_GC_THRESHOLD, True), (thresholds, frozen_by_caller))


def test_an_init_that_makes_its_own_module_getattr_keeps_it(package: Path) -> None:
    """trio's `__init__` does (for its deprecated names): the deferred package's stand-in must not remove it."""
    (package / "deferme/__init__.py").write_text("X = 1\n\n\ndef __getattr__(name):\n    return f'made {name}'\n")
    done = run_python(
        package,
        """
        import deferme
        print(deferme.X, deferme.anything, deferme.__getattr__.__module__)
        """,
    )
    assert done.stdout.splitlines() == ["1 made anything deferme"], done.stderr
