"""The one secrets filter: which names and values are secrets (API keys, tokens, passwords), kept away from the
agent's commands and masked in every output (command output, model errors, logs)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL"
    r"|^(OPENAI|ANTHROPIC|AZURE_OPENAI|GEMINI|MISTRAL|COHERE|GROQ|TOGETHER|DEEPSEEK|OPENROUTER|XAI|FIREWORKS"
    r"|LITELLM|LANGSMITH|LANGCHAIN)_",
    re.IGNORECASE,
)
MIN_SECRET_LENGTH = 8


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def scrubbed_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without secret-looking variables: what commands the agent runs on the host inherit."""
    return {
        key: value for key, value in (os.environ if environ is None else environ).items() if not is_secret_name(key)
    }


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret-looking variables (long enough to be told apart from ordinary text), longest first."""
    values = {value for key, value in (os.environ if environ is None else environ).items() if is_secret_name(key)}
    return sorted((value for value in values if len(value) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def known_secrets(*extra: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values of the environment plus `extra` ones (e.g. an API key given in the code), longest first."""
    values = set(secret_values(environ)) | {value for value in extra if value and len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str], mask: str = "***") -> str:
    """`text` with every occurrence of a secret replaced (a command can still read them, e.g. in /proc)."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, mask)
    return text
