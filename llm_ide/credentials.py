"""Which names and values are secrets (API keys, tokens, passwords): what secrets.py masks in every output and what
the agent's commands never get in their environment.

A secret is the value of an environment variable, an `environment.env` entry or a model setting (e.g. a header)
whose name says so (KEY, TOKEN, SECRET, PASS, PASSWORD, CREDENTIAL, AUTH … as a word or a word's end) or that the
settings list under `secrets`, and a credential found by its shape in any variable's value, whatever its name (a URL
or DSN with a password or a `?api-key=`, GitHub, GitLab, Slack, AWS, OpenAI, Anthropic, Google and npm tokens, JWTs,
private keys), as gitleaks and detect-secrets find them."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_WORD = re.compile(  # at a word's end: followed by no letter or digit of the upper-cased name
    r"(KEYS?|TOKENS?|SECRETS?|PASS|PASSWD|PASSWORDS?|PASSPHRASE|CREDENTIALS?|AUTH|AUTHORIZATION|COOKIE|PRIVATE)"
    r"(?![A-Z0-9])"
)
PROVIDER = re.compile(
    r"^(OPENAI|ANTHROPIC|AZURE_OPENAI|GEMINI|MISTRAL|COHERE|GROQ|TOGETHER|DEEPSEEK|OPENROUTER|XAI|FIREWORKS"
    r"|LITELLM|LANGSMITH|LANGCHAIN)_",
    re.IGNORECASE,
)
# a URL's query parameter named as a credential: `?api-key=`, `?accessToken=`, Azure Functions' `?code=`
QUERY = r"[?&](?:code|[\w.-]*?(?:key|token|secret|passw(?:or)?d|pass|auth|sig(?:nature)?)s?)=(?P<secret>[^&#\s'\"]+)"
# credentials by shape (the whole match, or its `secret` group, is the secret), each scanned only where the value,
SHAPES = [  # lower-cased, holds one of its texts: `in` runs in C, a scan ~1 µs a character (a run's settings ~14 ms)
    (("://",), re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:(?P<secret>[^@\s/]+)@")),  # a URL with a password
    (("://",), re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?P<secret>[A-Za-z0-9]{16,})@")),  # a DSN whose user is a key
    (("key", "token", "secret", "pass", "auth", "sig", "code="), re.compile(QUERY, re.I)),  # URLs'
    (("password=",), re.compile(r"(?:^|\s)password=(?P<secret>[^\s']+)", re.IGNORECASE)),  # a libpq keyword DSN
    (("gh",), re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),  # GitHub
    (("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),  # GitLab
    (("xox", "xapp-"), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}|\bxapp-[A-Za-z0-9-]{10,}")),  # Slack
    (("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),  # AWS access key ids
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),  # JWTs
    (("sk-",), re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")),  # OpenAI, Anthropic
    (("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),  # Google
    (("npm_", "k_live_"), re.compile(r"\bnpm_[A-Za-z0-9]{36}\b|\b[rs]k_live_[A-Za-z0-9]{20,}")),  # npm, Stripe
    (("key-----",), re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----")),
]
NEEDLES = re.compile("|".join(re.escape(needle) for needles, _ in SHAPES for needle in needles))  # any shape's
GIT_CONFIG_KEY = re.compile(r"GIT_CONFIG_KEY_\d+")
MIN_SECRET_LENGTH = 6
NOT_SECRETS = {"true", "false", "yes", "no", "none", "null", "enabled", "disabled"}
MASK = "***"
_marked: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """KEY, TOKEN, SECRET, PASS(WORD), CREDENTIAL, AUTH(ORIZATION) … as a word of the name or a word's end (`DB_PASS`,
    `PGPASSWORD`, `X-Api-Key`; not `GIT_AUTHOR_NAME`, a git setting's `GIT_CONFIG_KEY_0`), a provider's, or marked."""
    upper = name.upper()
    if upper in _marked or PROVIDER.search(name):
        return True
    return not GIT_CONFIG_KEY.fullmatch(upper) and SECRET_WORD.search(upper) is not None


def mark_secret_names(names: Iterable[str]) -> None:
    """Names the settings list under `secrets`: secret whatever they are called."""
    with _lock:
        _marked.update(name.upper() for name in names)


def credentials_in(value: str) -> list[str]:
    """The credentials `value` holds by their shape (the password of a URL, a token), none when it holds none."""
    found, lowered = [], value.lower()
    if len(lowered) < 512 and not NEEDLES.search(lowered):  # a short value: one scan, not one per shape's text
        return found
    for needles, shape in SHAPES:
        if any(needle in lowered for needle in needles):
            found += [match.group("secret" if "secret" in shape.groupindex else 0) for match in shape.finditer(value)]
    return found


def is_secret_variable(name: str, value: str) -> bool:
    """A variable the agent's commands never get: secret by its name, or holding a credential by its value's shape."""
    return is_secret_name(name) or bool(credentials_in(value))


def scrubbed_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without secret-looking variables: what commands the agent runs on the host inherit."""
    return {
        key: value
        for key, value in (os.environ if environ is None else environ).items()
        if not is_secret_variable(key, value)
    }


def maskable(value: str) -> bool:
    return len(value) >= MIN_SECRET_LENGTH and value.strip().lower() not in NOT_SECRETS


def secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """The secrets of the environment (long enough to be told apart from ordinary words): the values of its secret
    variables, and the credentials any value holds (with the whole value that holds them)."""
    values = set()
    for key, value in (os.environ if environ is None else environ).items():
        found = credentials_in(value)
        if found or is_secret_name(key):
            values |= {value, *found}
    return {value for value in values if maskable(value)}


def secrets_in(data: Any, secret_key: bool = False) -> list[str]:
    """The secret values in nested settings data: the strings under a secret name (at any depth below it)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            found += secrets_in(value, secret_key or (isinstance(key, str) and is_secret_name(key)))
    elif isinstance(data, list | tuple):
        for value in data:
            found += secrets_in(value, secret_key)
    elif isinstance(data, str) and secret_key:
        found.append(data)
        found += [part for part in data.split() if maskable(part)]  # "Bearer sk-…": the token on its own too
    elif isinstance(data, str) and (credentials := credentials_in(data)):
        found += [data, *credentials]
    return found


def redacted(data: Any, secret_key: bool = False) -> Any:
    """Nested settings data with every value under a secret name replaced by the mask."""
    if isinstance(data, Mapping):
        return {
            key: redacted(value, secret_key or (isinstance(key, str) and is_secret_name(key)))
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [redacted(value, secret_key) for value in data]
    return MASK if isinstance(data, str) and (secret_key or credentials_in(data)) else data
