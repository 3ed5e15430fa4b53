"""Checks before a batch starts (model, endpoint, Docker) and the local checkout of an instance."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from llm_ide.composition import Settings
from llm_ide.errors import UsageError
from llm_ide.models import ModelError, get_model
from llm_ide.pricing import langchain_providers
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


def check_model(model: str, settings: Settings, base_url: str | None, timeout: float = 5.0) -> None:
    """Fail before the batch when the model cannot be built, lacks its key, or its endpoint refuses connections."""
    model = model.replace("{attempt}", "1")  # one model per attempt (llm_ide/attempts): the first one's is checked
    if problem := missing_key(model, settings, base_url):
        raise SWEbenchError(problem)

    try:
        get_model(model, settings.model, base_url)
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


def clone_for_local(instance: Instance, destination: Path) -> Path:
    """For `--environment local`: a checkout of the instance's repository at its base commit (reused on resume)."""
    if (destination / ".git").exists():
        return destination
    source = instance.repo
    if not source:
        raise SWEbenchError(f"{instance.instance_id}: the local environment needs the row's `repo` field")
    if not (Path(source).exists() or "://" in source or source.startswith("git@")):
        source = f"https://github.com/{source}.git"
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    steps = [["git", "clone", "-q", source, str(partial)]]
    if instance.base_commit:
        steps.append(["git", "-C", str(partial), "checkout", "-q", instance.base_commit])
    for command in steps:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise SWEbenchError(f"{instance.instance_id}: {' '.join(command)} failed: {result.stderr.strip()[:500]}")
    mark_owned(
        partial
    )  # ours: what came after the base commit is removed before the agent starts (workspace/history.py)
    partial.rename(destination)
    return destination


def check_docker() -> None:
    import docker

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as error:
        raise SWEbenchError(
            f"the Docker engine is not reachable ({error}); "
            "start it (scripts/start_docker.sh) or use --environment local"
        ) from None
