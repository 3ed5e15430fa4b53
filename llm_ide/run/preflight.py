"""One preflight for every door (the command line, the Python API, LangGraph Studio): before a run starts, its limits,
its repository, its model's name, key and endpoint are checked, each failure one line (a PreflightError, exit 2):
nothing is set up, run or written first."""

from __future__ import annotations

import importlib.util
import os
import socket
import ssl
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, urlparse

import httpx
from pydantic import ValidationError, create_model

from llm_ide.composition import attempt_uses
from llm_ide.endpoint import below, listed_models, tls_context
from llm_ide.environments import capabilities
from llm_ide.environments.bwrap import bwrap_problem
from llm_ide.environments.views import absent, check_mount_point
from llm_ide.errors import PreflightError
from llm_ide.exchange import tools_asked
from llm_ide.inputs import CLI, Names
from llm_ide.models import ModelError, unknown_provider, unpriced, warn_once
from llm_ide.plain_post import answers_http
from llm_ide.priced import find_price, langchain_providers
from llm_ide.run.repository_check import check_repository
from llm_ide.run.usage import check_task
from llm_ide.script_file import load_script
from llm_ide.setting_errors import describe_error
from llm_ide.settings import CoreSettings, bundled_yaml
from llm_ide.variant import Variants

PREFLIGHT_TIMEOUT = 2.0  # seconds to connect to the model's endpoint before the run starts


# The API key variables of the langchain providers that need one (any of them will do); a provider left out here
# authenticates otherwise (cloud credential chains, a local server) and is not checked.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "azure_openai": ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistralai": ("MISTRAL_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
    "upstage": ("UPSTAGE_API_KEY",),
    "huggingface": ("HUGGINGFACEHUB_API_TOKEN", "HF_TOKEN"),
    "baseten": ("BASETEN_API_KEY",),
    "ibm": ("WATSONX_APIKEY", "WATSONX_API_KEY"),
    "langsmith": ("LANGSMITH_API_KEY",),
}
# The endpoint each provider talks to unless --base-url says otherwise: (variable that moves it, default URL).
PROVIDER_URLS: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_BASE_URL",), "https://api.openai.com/v1"),
    "anthropic": (("ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL"), "https://api.anthropic.com"),
}
KEY_KWARGS = {"api_key", "openai_api_key", "anthropic_api_key", "google_api_key"}
LOCAL_NETWORKS = ("none", "host", "llm-ide")  # llm-ide: the default, docker's bridge of ours
MAX_LISTED = 20  # model names shown when the endpoint does not list the one asked for


def preflight(
    model: str,
    settings: CoreSettings,
    *,
    base_url: str | None = None,
    repo: Path | str | None = None,
    task: str | None = None,
    timeout: float = PREFLIGHT_TIMEOUT,
    quiet: bool = True,
    variants: Variants | None = None,
    environment: str | None = None,
    image: str | None = None,
    imaged: bool = True,
    attempted: bool | None = None,
    names: Names = CLI,
) -> None:
    """Everything a run needs before it starts, in the order a user fixes it: the task (when given), the limits, the
    repository (when the run works on one), the image of an environment that runs one, the model (name, key,
    endpoint), then what its `variants` need (their own models checked as the run's). A failure is one line (a
    UsageError) in the words of the door used (`names`). `quiet`: the models' warnings (no price) are left for the run
    to say (the command line says them here)."""
    if task is not None:
        check_task(task)
    check_limits(settings)
    if repo is not None:
        check_repository(Path(repo).expanduser(), names.repo)
    kind = environment or settings.environment.type  # (`imaged` False: a batch's images come with its instances)
    check_network(settings.environment.network, kind)
    check_mount(settings.environment.mount_at, settings.environment.sandbox, kind)
    check_writable(settings.environment.writable, kind)
    check_readable(settings.environment.readable, kind)
    if imaged and capabilities(kind).image and not (image or settings.environment.image):
        raise PreflightError(f"the {kind} environment needs an image: give {names.image}")
    check_model(model, settings, base_url, timeout, quiet, names)
    check_variants(variants or Variants(), settings, base_url, timeout, quiet, model, attempted, names)


def check_variants(
    variants: Variants,
    settings: Any,
    base_url: str | None,
    timeout: float = PREFLIGHT_TIMEOUT,
    quiet: bool = True,
    model: str | None = None,
    attempted: bool | None = None,
    names: Names = CLI,
) -> None:
    """What the run's variants need, their own models checked as the run's (the setting naming one says which); with
    the run's `model`, every attempt's, the reviewer's and chooser's (composition.attempt_uses; `attempted`: tried
    and reviewed whatever the settings' number of tries) too."""
    for use in [*variants.check(settings), *(attempt_uses(model, settings, attempted) if model else [])]:
        said = replace(names, model=use.setting, base_url=use.endpoint if use.base_url else names.base_url)
        try:
            check_model(use.spec, settings, use.base_url or base_url, timeout, quiet, said)
        except PreflightError as error:
            raise PreflightError(f"{use.setting}: {error}") from None


def check_limits(settings: CoreSettings) -> None:
    """The run's limits hold what their settings allow (finite, not negative): settings built around the validation
    (`model_construct`, an assignment to a copy) are refused here, in the words of a config error."""
    values = {"agent": settings.agent.model_dump()}
    try:
        create_model("Limits", agent=(type(settings.agent), ...)).model_validate(values)
    except ValidationError as error:
        raise PreflightError(describe_error(error, [("settings", values)])) from None


def check_network(network: str | None, kind: str) -> None:
    """Locally `none` cuts the commands off the network; the default (our docker bridge's name) and `host` keep the
    host's. Any other value (a typo of none, null) is refused, never taken for the host's network; in docker, null
    (which docker takes for its default bridge)."""
    if network is None or (kind == "local" and network not in LOCAL_NETWORKS):
        joins = "shares the host's network (host, or the default llm-ide)"
        joins = joins if kind == "local" else "joins a docker network by its name (the default llm-ide, host, yours)"
        raise PreflightError(f"environment.network: {network!r}: a {kind} run {joins} or has none (none)")


def check_mount(mount_at: str | None, sandbox: str, kind: str) -> None:
    """Where a local run shows the repository (`environment.mount_at`): a path bubblewrap can make, and bubblewrap
    there to make it, checked before anything starts."""
    if kind != "local" or mount_at is None:
        return
    try:
        check_mount_point(mount_at)
    except ValueError as error:
        raise PreflightError(f"environment.mount_at: {error}") from None
    if problem := "environment.sandbox is none" if sandbox == "none" else bwrap_problem():
        raise PreflightError(f"environment.mount_at ({mount_at}) needs bubblewrap, and {problem}")


def check_writable(writable: list[str], kind: str) -> None:
    """The paths a local run's sandboxed commands may write besides the repository: each there (bubblewrap shows only
    what exists; the commands found a path listed but missing read-only, and nothing said why)."""
    problems = [problem for path in writable if kind == "local" and (problem := absent(path))]
    if problems:
        made = " (make it first)" if problems[0].endswith("no such file or folder") else ""
        raise PreflightError(f"environment.writable: {problems[0]}{made}")


def check_readable(readable: list[str], kind: str) -> None:
    """The paths a local run shows its sandboxed commands read-only: each there, but the bundled list's toolchains
    (shown where installed). A typo showed nothing, without a word."""
    bundled = bundled_yaml("default.yaml")["environment"]["readable"]
    problems = [problem for path in readable if kind == "local" and path not in bundled and (problem := absent(path))]
    if problems:
        raise PreflightError(f"environment.readable: {problems[0]}")


def provider_of(model: str) -> str | None:
    """The langchain provider of `provider:name`; None for scripted and OpenAI-compatible names."""
    prefix, colon, _ = model.partition(":")
    return prefix if colon and prefix in langchain_providers() else None


def model_endpoint(model: str, base_url: str | None) -> str | None:
    """The URL a `--model` talks to; None when we cannot tell (scripted, providers of no known endpoint)."""
    if model.startswith("scripted:"):
        return None
    provider = provider_of(model)
    if provider is None:
        return base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    if base_url or provider not in PROVIDER_URLS:
        return base_url
    variables, default = PROVIDER_URLS[provider]
    return next((os.environ[name] for name in variables if os.environ.get(name)), default)


def empty_name(model: str, option: str = "--base-url") -> str | None:
    """A model spec that names nothing: blank, `scripted:` without a file, `provider:` without a model."""
    if not model.strip():
        return f"no model: give one (e.g. openai:gpt-5-mini, scripted:FILE.yaml, or a name with {option})"
    prefix, colon, name = model.partition(":")
    if prefix == "scripted" and not name.strip():
        return f"model {model} names no script; give scripted:FILE.yaml (a YAML list of replies)"
    if colon and not name.strip() and prefix in langchain_providers():
        return f"model {model} names no model after the provider; give {prefix}:NAME"
    return None


def missing_key(model: str, settings: Any, base_url: str | None, option: str = "--base-url") -> str | None:
    """A provider's model needs its API key variable (or a key in the settings' model kwargs); a bare
    OpenAI-compatible name needs OPENAI_API_KEY unless a URL (of a keyless local server) is given."""
    if KEY_KWARGS & set(settings.model.kwargs) or model.startswith("scripted:"):
        return None
    provider = provider_of(model)
    if provider is None:
        if ":" in model or os.environ.get("OPENAI_API_KEY") or base_url or os.environ.get("OPENAI_BASE_URL"):
            return None  # an unknown provider is told by get_model
        hint = f"for a keyless local server give {option} or OPENAI_BASE_URL"
        return f"model {model}: OPENAI_API_KEY is not set ({hint})"
    names = PROVIDER_KEYS.get(provider, ())
    if not names or any(os.environ.get(name) for name in names):
        return None
    bare = f" (a keyless server at {option}: give its name alone, {model.partition(':')[2]})" if base_url else ""
    return f"model {model}: {' or '.join(names)} is not set{bare}"


def check_model(
    model: str,
    settings: Any,
    base_url: str | None,
    timeout: float = PREFLIGHT_TIMEOUT,
    quiet: bool = False,
    names: Names = CLI,
) -> None:
    """The model names something, has its key, could be built (none is: the run builds its own, once), its endpoint
    accepts a connection within `timeout`, and an OpenAI-compatible endpoint that lists its models lists this one. A
    run whose model is `…{attempt}…` (one per try) is checked with the first one's (the other tries', its reviewer's
    and chooser's: check_variants). `quiet`: a model without a price is left for the run to say."""
    model = model.replace("{attempt}", "1")
    if problem := empty_name(model, names.base_url) or missing_key(model, settings, base_url, names.base_url):
        raise PreflightError(problem)
    try:
        buildable(model, base_url, names.base_url)
    except ModelError as error:
        raise PreflightError(str(error)) from None
    if not quiet and not model.startswith("scripted:") and find_price(model, settings.model.prices) is None:
        warn_once("price", model, unpriced(model))
    url = model_endpoint(model, base_url)
    if url is None:
        return
    parsed, host, port = endpoint_address(model, url)
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        hint = f"OpenAI-compatible endpoint with {names.base_url} or OPENAI_BASE_URL"
        hint = hint if provider_of(model) is None else f"endpoint with {names.base_url}"
        raise PreflightError(
            f"could not reach model {model} at {url} ({error.strerror or error}); give a reachable {hint} "
            f"(or use {names.model} scripted:FILE.yaml for a dry run)"
        ) from None
    with connection:  # https: the handshake on it
        if parsed.scheme == "https":
            check_tls(model, url, connection, (host, port))
    if settings.model.check_name and provider_of(model) in (None, "openai"):
        check_listed(model, url, settings, timeout, names)
    if tools_asked(settings) and provider_of(model) in (None, "openai"):
        check_template(model, url, timeout)


def endpoint_address(model: str, url: str) -> tuple[ParseResult, str, int]:
    """The endpoint's parsed URL, host and port; a URL that names none is one line."""
    try:
        parsed = urlparse(url)
        port = parsed.port
    except ValueError as error:
        raise PreflightError(f"model {model}: the endpoint {url} is no valid URL ({error})") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        example = "" if "://" in url else f" (e.g. http://{url})"
        raise PreflightError(f"model {model}: the endpoint {url} is no http:// or https:// URL{example}")
    return parsed, parsed.hostname, port or (443 if parsed.scheme == "https" else 80)


def check_template(model: str, url: str, timeout: float) -> None:
    """A llama.cpp server says what its chat template takes (GET /props): one that renders no tools drops them from
    every prompt, and the model, told its actions are tools, is shown none. Other servers say nothing: not asked."""
    root = urlparse(url)._replace(path="/props", query="", fragment="").geturl()
    try:
        caps = httpx.get(root, timeout=timeout, verify=tls_context()).json().get("chat_template_caps") or {}
    except (httpx.HTTPError, ValueError, AttributeError):
        return
    if caps.get("supports_tools") is False:
        raise PreflightError(
            f"model {model}: the server's chat template renders no tools ({root}: supports_tools false); start "
            "llama-server with one that does (--jinja, --chat-template-file), or set model.action_format: text"
        )


def check_tls(model: str, url: str, connection: socket.socket, address: tuple[str, int]) -> None:
    """An https:// endpoint answers TLS with a certificate the run trusts, not plain HTTP (llama.cpp's: silent)."""
    with tls_context().wrap_socket(connection, server_hostname=address[0], do_handshake_on_connect=False) as tls:
        try:
            return tls.do_handshake()
        except ssl.SSLCertVerificationError as error:
            raise PreflightError(f"model {model}: {url}: certificate not trusted ({error.verify_message})") from None
        except ssl.SSLError as error:
            why = str(error.reason or error).lower().replace("_", " ")
        except OSError:  # no answer in time: left to the run, unless the hello ended as an HTTP head gets an answer
            why = "it answers plain HTTP" if answers_http(tls) else ""
    plain = urlparse(url)._replace(scheme="http").geturl()
    if why:
        raise PreflightError(f"model {model}: {url} does not answer TLS ({why}); for a plain HTTP server give {plain}")


def buildable(model: str, base_url: str | None, option: str = "--base-url") -> None:
    """What would keep the model from being built, told without building one: a script that cannot be read, an
    unknown provider, a provider whose integration package is not installed."""
    if model.startswith("scripted:"):
        load_script(Path(model.removeprefix("scripted:")).expanduser())
    elif problem := unknown_provider(model, base_url, option):
        raise ModelError(problem)
    elif (provider := provider_of(model)) is not None:
        from langchain.chat_models import base

        package = str((getattr(base, "_BUILTIN_PROVIDERS", {}).get(provider) or ("",))[0])  # init_chat_model's table
        if package and importlib.util.find_spec(package.split(".")[0]) is None:
            raise ModelError(f"cannot create model {model}: its integration package {package} is not installed")


def check_listed(model: str, url: str, settings: Any, timeout: float, names: Names = CLI) -> None:
    """An OpenAI-compatible endpoint that lists its models (`/v1/models`) must list this one (Ollama's `name` is its
    `name:latest`); one that lists none, or cannot say in time, is not asked further. Where nothing answers at the
    URL's path but the same server's `/v1` lists models, the URL is a typo for that one."""
    name = model.removeprefix("openai:")
    key = settings.model.kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    key = key if isinstance(key, str) else None
    listed = listed_models(url, key, timeout)
    if listed == [] and urlparse(url).path.rstrip("/") != "/v1":
        served = urlparse(url)._replace(path="/v1", fragment="").geturl()  # (its query the endpoint's: a key)
        if elsewhere := listed_models(served, key, timeout):
            raise PreflightError(
                f"nothing answers at {url} (GET {below(url, '/models')}: 404), but {served} lists "
                f"{shown(elsewhere)}; pass {names.base_url} {served}"
            )
    if not listed or name in listed or f"{name}:latest" in listed:
        return
    raise PreflightError(
        f"model {name} is not served at {url}, which lists: {shown(listed)}; pass one of them to {names.model} "
        "(or set model.check_name: false)"
    )


def shown(names: list[str]) -> str:
    return ", ".join(names[:MAX_LISTED]) + (f" … ({len(names)} in all)" if len(names) > MAX_LISTED else "")
