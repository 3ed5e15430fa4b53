"""Checks before a batch starts (model, endpoint, Docker) and the local checkout of an instance."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from llm_ide.composition import Settings
from llm_ide.endpoint import listed_models
from llm_ide.errors import UsageError
from llm_ide.models import ModelError, unknown_provider
from llm_ide.pricing import langchain_providers
from llm_ide.scripted import load_script
from llm_ide.swebench.dataset import Instance
from llm_ide.workspace.history import mark_owned


class SWEbenchError(UsageError, ValueError):
    """A user error that stops the batch before it starts (unreachable model, bad options)."""


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
MAX_LISTED = 20  # model names shown when the endpoint does not list the one asked for


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


def missing_key(model: str, settings: Settings, base_url: str | None) -> str | None:
    """Checked before anything heavy is imported: a provider's model needs its API key variable (or a key in the
    settings' model kwargs); a bare OpenAI-compatible name needs OPENAI_API_KEY unless a URL (of a keyless local
    server) is given."""
    if KEY_KWARGS & set(settings.model.kwargs) or model.startswith("scripted:"):
        return None
    provider = provider_of(model)
    if provider is None:
        if ":" in model or os.environ.get("OPENAI_API_KEY") or base_url or os.environ.get("OPENAI_BASE_URL"):
            return None  # an unknown provider is told by get_model
        hint = "for a keyless local server give --base-url or OPENAI_BASE_URL"
        return f"model {model}: OPENAI_API_KEY is not set ({hint})"
    names = PROVIDER_KEYS.get(provider, ())
    if not names or any(os.environ.get(name) for name in names):
        return None
    return f"model {model}: {' or '.join(names)} is not set"


def buildable(model: str, base_url: str | None) -> None:
    """What would keep the model from being built, told without building one: a script that cannot be read, an
    unknown provider, a provider whose integration package is not installed."""
    if model.startswith("scripted:"):
        load_script(Path(model.removeprefix("scripted:")).expanduser())
    elif problem := unknown_provider(model, base_url):
        raise ModelError(problem)
    elif (provider := provider_of(model)) is not None:
        from langchain.chat_models import base

        package = str((getattr(base, "_BUILTIN_PROVIDERS", {}).get(provider) or ("",))[0])  # init_chat_model's table
        if package and importlib.util.find_spec(package.split(".")[0]) is None:
            raise ModelError(f"cannot create model {model}: its integration package {package} is not installed")


def check_model(model: str, settings: Settings, base_url: str | None, timeout: float = 5.0) -> None:
    """Fail before the batch when the model cannot be built, lacks its key, its endpoint refuses connections, or an
    OpenAI-compatible endpoint lists its models without this one."""
    model = model.replace("{attempt}", "1")  # one model per attempt (llm_ide/attempts): the first one's is checked
    if problem := missing_key(model, settings, base_url):
        raise SWEbenchError(problem)

    try:
        buildable(model, base_url)  # each run builds its own model: none is built here
    except ModelError as error:
        raise SWEbenchError(str(error)) from None
    url = model_endpoint(model, base_url)
    if url is None:
        return
    parsed = urlparse(url)
    host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        hint = "OpenAI-compatible endpoint with --base-url URL or OPENAI_BASE_URL"
        hint = hint if provider_of(model) is None else "endpoint with --base-url URL"
        raise SWEbenchError(
            f"could not reach model {model} at {url} ({error.strerror or error}); give a reachable {hint} "
            "(or use --model scripted:FILE.yaml for a dry run)"
        ) from None
    if settings.model.check_name and provider_of(model) in (None, "openai"):
        check_listed(model, url, settings, timeout)


def check_listed(model: str, url: str, settings: Settings, timeout: float) -> None:
    """An OpenAI-compatible endpoint that lists its models (`/v1/models`) must list this one (Ollama's `name` is its
    `name:latest`); one that lists none, or cannot say in time, is not asked further."""
    name = model.removeprefix("openai:")
    key = settings.model.kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    listed = listed_models(url, key if isinstance(key, str) else None, timeout)
    if listed is None or name in listed or f"{name}:latest" in listed:
        return
    shown = ", ".join(listed[:MAX_LISTED]) + (f" … ({len(listed)} in all)" if len(listed) > MAX_LISTED else "")
    raise SWEbenchError(
        f"model {name} is not served at {url}, which lists: {shown}; pass one of them to --model "
        "(or set model.check_name: false)"
    )


def local_source(instance: Instance, repos: Path | None) -> str:
    """Where `--environment local` clones an instance's repository from: with `repos`, the folder's
    `<owner>__<name>.bundle` or clone `<owner>__<name>/` (as the instance id names it); else the row's `repo`: a
    local clone or bundle (a path), a URL, or `owner/name` on GitHub."""
    if repos is not None:
        stem = instance.instance_id.rsplit("-", 1)[0]
        candidates = [repos / f"{stem}.bundle", repos / stem, repos / f"{stem}.git"]
        found = next((path for path in candidates if path.exists()), None)
        if found is None:
            raise SWEbenchError(f"{instance.instance_id}: --repos {repos} holds no {stem}.bundle nor a clone {stem}/")
        return str(found.absolute())
    source = instance.repo
    if not source:
        raise SWEbenchError(f"{instance.instance_id}: the local environment needs the row's `repo` field (or --repos)")
    if Path(source).expanduser().exists():
        return str(Path(source).expanduser().absolute())
    return source if "://" in source or source.startswith("git@") else f"https://github.com/{source}.git"


def clone_for_local(instance: Instance, destination: Path, repos: Path | None = None) -> Path:
    """For `--environment local`: a checkout of the instance's repository at its base commit (reused on resume),
    cloned from `local_source`. A bundle or clone without the base commit may hold a branch named after the instance
    at its tree (the shape of per-instance bundles): that branch is checked out then."""
    if (destination / ".git").exists():
        return destination
    source = local_source(instance, repos)
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    git(instance, ["clone", "-q", "--no-checkout", source, str(partial)])
    wanted = instance.base_commit or "HEAD"
    if not holds(partial, f"{wanted}^{{commit}}"):
        branch = f"origin/{instance.instance_id}"
        if not holds(partial, branch):
            raise SWEbenchError(
                f"{instance.instance_id}: {source} holds neither the base commit {wanted} nor a branch "
                f"{instance.instance_id}"
            )
        wanted = branch
    git(instance, ["-C", str(partial), "checkout", "-q", "--detach", wanted])
    mark_owned(partial)  # ours: what came after the base commit is removed before the agent starts
    partial.rename(destination)
    return destination


def holds(clone: Path, revision: str) -> bool:
    found = subprocess.run(["git", "-C", str(clone), "rev-parse", "-q", "--verify", revision], capture_output=True)
    return found.returncode == 0


def git(instance: Instance, arguments: list[str]) -> None:
    result = subprocess.run(["git", *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise SWEbenchError(f"{instance.instance_id}: git {' '.join(arguments)} failed: {result.stderr.strip()[:500]}")


def check_docker() -> None:
    import docker

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as error:
        raise SWEbenchError(
            f"the Docker engine is not reachable ({error}); "
            "start it (scripts/start_docker.sh) or use --environment local"
        ) from None
