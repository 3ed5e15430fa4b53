"""Packages a dependency imports for a small part of them, their `__init__` run only when a name of theirs is first
asked for. Deferred, a package imports as an empty module with its `__path__` (its submodules import as before); its
`__init__` runs at the first other attribute asked of it, by anyone, and the package is then the one a plain import
gives. Every `llm-ide` process imports LangGraph, which pulls in (of the ~1.9 s of CPU a short scripted run takes):
- `langsmith.types` (~0.2 s): LangChain's tracers import `langsmith.run_trees`, which takes one small module from it;
  its `__init__` builds ~230 API models (LangSmith's sandboxes, datasets, …), used only by tracing.
- `langgraph_sdk` (~0.05 s): `langgraph.runtime` takes `langgraph_sdk.auth.types`; the package's `__init__` imports
  the client of LangGraph's server (httpx, websockets), used only by a remote graph.
- `trio`, where installed (selenium installs it; ~0.1 s): httpcore imports it to offer it as a backend, unused here.
A run whose model is an OpenAI-compatible endpoint also imports LangChain's `ChatOpenAI` and the OpenAI SDK (~1.1 s
with openai 3.x, ~0.45 s deferred):
- `openai.types` and `openai.types.responses` (~0.55 s): their `__init__`s build ~900 API models (evals, graders, the
  Responses API's events); the SDK's client takes a few modules from them, a chat completion a few more.
- `langchain_openai` and `langchain_openai.chat_models` (~0.1 s): their `__init__`s import Azure's models, the
  embeddings and the completion models besides `ChatOpenAI`, which llm-ide imports from its own module.
The OpenAI and Anthropic SDKs' aiohttp clients are left out whole (ABSENT): where aiohttp is installed (`datasets` and
swebench's `modal` install it), each SDK imports it (~0.2 s, and a CA bundle loaded) to offer `DefaultAioHttpClient`,
which llm-ide never uses (its calls are synchronous, over its own httpx client); the SDK then does what it does where
aiohttp is missing. So is httpx's command-line client (`httpx._main`: rich's syntax highlighting and pygments, ~10 ms),
which httpx's `__init__` imports for the `httpx` program only; `httpx.main` is then the stub it makes where its `cli`
extra is missing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from functools import partial
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

DEFERRED = frozenset(
    {
        "langsmith.types",
        "langgraph_sdk",
        "trio",
        "openai.types",
        "openai.types.responses",
        "langchain_openai",
        "langchain_openai.chat_models",
    }
)
ABSENT = frozenset({"openai._vendor.httpx_aiohttp", "anthropic._vendor.httpx_aiohttp", "httpx._main"})


class DeferredInit(MetaPathFinder, Loader):
    """On sys.meta_path: finds the packages `names` as the path finder does and loads them deferred."""

    def __init__(self, names: frozenset[str] = DEFERRED) -> None:
        self.names = names
        self.lock = threading.RLock()  # one `__init__` at a time: other threads wait for it
        self.running: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.names:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return None
        spec.loader_state, spec.loader = spec.loader, self
        return spec

    def exec_module(self, module: ModuleType) -> None:
        module.__getattr__ = partial(self.run_init, module)  # type: ignore[method-assign]

    def run_init(self, module: ModuleType, attribute: str) -> Any:
        """The package's `__init__`, once; asked from within it, a name not made yet is missing (as in any import)."""
        spec = module.__spec__
        assert spec is not None
        with self.lock:
            if spec.name in self.running:
                raise AttributeError(f"partially initialized module {spec.name!r} has no attribute {attribute!r}")
            if spec.loader is self:
                deferred = module.__dict__.get("__getattr__")
                spec.loader = module.__loader__ = spec.loader_state
                self.running.add(spec.name)
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    sys.modules.pop(spec.name, None)
                    raise
                finally:
                    self.running.discard(spec.name)
                    if module.__dict__.get("__getattr__") is deferred:
                        del module.__getattr__
        return getattr(module, attribute)


def install() -> None:
    """Defer the DEFERRED packages and leave the ABSENT modules out in this process (once; those imported already
    stay as they are)."""
    if not any(isinstance(finder, DeferredInit) for finder in sys.meta_path):
        sys.meta_path.insert(0, DeferredInit())
    for name in ABSENT:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # an import of it fails: ModuleNotFoundError
