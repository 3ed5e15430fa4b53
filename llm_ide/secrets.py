"""The one secrets filter: which names and values are secrets (API keys, tokens, passwords), kept away from the
agent's commands and masked in every output (observations, model requests and replies, logs, trajectories, preds).

A secret is the value of an environment variable, an `environment.env` entry or a model setting (e.g. a header)
whose name says so (KEY, TOKEN, SECRET, PASS, PASSWORD, CREDENTIAL, AUTH … as a word or a word's end) or that the
settings list under `secrets`, and a credential found by its shape in any variable's value, whatever its name (a URL
or DSN with a password or a `?api-key=`, GitHub, GitLab, Slack, AWS, OpenAI, Anthropic, Google and npm tokens, JWTs,
private keys), as gitleaks and detect-secrets find them. Masking covers the value as is, reversed, rot13'd, URL-encoded,
hex and base64 (at any alignment, wrapped over lines or not), for values of `MIN_SECRET_LENGTH` characters or more.
The environment's secrets are found once per change of the environment, not at every output."""

from __future__ import annotations

import base64
import codecs
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

SECRET_WORD = re.compile(
    r"(KEYS?|TOKENS?|SECRETS?|PASS|PASSWD|PASSWORDS?|PASSPHRASE|CREDENTIALS?|AUTH|AUTHORIZATION|COOKIE|PRIVATE)$"
)
PROVIDER = re.compile(
    r"^(OPENAI|ANTHROPIC|AZURE_OPENAI|GEMINI|MISTRAL|COHERE|GROQ|TOGETHER|DEEPSEEK|OPENROUTER|XAI|FIREWORKS"
    r"|LITELLM|LANGSMITH|LANGCHAIN)_",
    re.IGNORECASE,
)
QUERY = r"[?&](?:[\w.-]*[_.-])?(?:api)?(?:key|token|secret|passw(?:or)?d|pass|auth|sig(?:nature)?)s?="  # `?api-key=…`
# credentials by shape (the whole match, or its `secret` group, is the secret), each scanned only where the value,
SHAPES = [  # lower-cased, holds one of its texts: `in` runs in C, a scan ~1 µs a character (a run's settings ~14 ms)
    (("://",), re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:(?P<secret>[^@\s/]+)@")),  # a URL with a password
    (("://",), re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?P<secret>[A-Za-z0-9]{16,})@")),  # a DSN whose user is a key
    (("key", "token", "secret", "pass", "auth", "sig"), re.compile(QUERY + r"(?P<secret>[^&#\s'\"]+)", re.I)),  # URLs'
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
MIN_SECRET_LENGTH = 6
NOT_SECRETS = {"true", "false", "yes", "no", "none", "null", "enabled", "disabled"}
MASK = "***"
_registered: set[str] = set()
_marked: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """KEY, TOKEN, SECRET, PASS(WORD), CREDENTIAL, AUTH(ORIZATION) … as a word of the name or a word's end (`DB_PASS`,
    `PGPASSWORD`, `X-Api-Key`; not `GIT_AUTHOR_NAME`, a git setting's `GIT_CONFIG_KEY_0`), a provider's, or marked."""
    if name.upper() in _marked or PROVIDER.search(name):
        return True
    words = [word for word in re.split(r"[^A-Z0-9]+", name.upper()) if word]
    return not re.fullmatch(r"GIT_CONFIG_KEY_\d+", name.upper()) and any(map(SECRET_WORD.search, words))


def mark_secret_names(names: Iterable[str]) -> None:
    """Names the settings list under `secrets`: secret whatever they are called."""
    with _lock:
        _marked.update(name.upper() for name in names)


def credentials_in(value: str) -> list[str]:
    """The credentials `value` holds by their shape (the password of a URL, a token), none when it holds none."""
    found, lowered = [], value.lower()
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


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of the environment (long enough to be told apart from ordinary words), longest first: the values
    of its secret variables, and the credentials any value holds (with the whole value that holds them)."""
    values = set()
    for key, value in (os.environ if environ is None else environ).items():
        found = credentials_in(value)
        if found or is_secret_name(key):
            values |= {value, *found}
    return longest_first(value for value in values if maskable(value))


_environment: tuple[dict[Any, Any], tuple[str, ...]] = ({}, ())


def environment_secrets() -> tuple[str, ...]:
    """`secret_values()` of this process's environment, found again only when the environment has changed (comparing
    it with the copy kept is a C-level dict comparison, not a scan of every variable)."""
    global _environment
    current = getattr(os.environ, "_data", None) or os.environ
    kept, values = _environment
    if current != kept:  # copied only when it changed
        values = tuple(secret_values())
        _environment = (dict(current), values)
    return values


def longest_first(values: Iterable[str]) -> list[str]:  # then in order: one list whatever order a set gives
    return sorted(values, key=lambda value: (-len(value), value))


def known_secrets(*extra: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of the environment, the loaded settings and `extra` (an API key given in code), longest first."""
    found = secret_values(environ) if environ is not None else environment_secrets()
    return longest_first({*found, *registered(), *(value for value in extra if value and maskable(value))})


def register(values: Iterable[str]) -> None:
    """Values that are secret although no environment variable holds them (settings: headers, `environment.env`)."""
    with _lock:
        _registered.update(value for value in values if isinstance(value, str) and maskable(value))


def registered() -> list[str]:
    """The values `register` was given (a URL's password on the command line): what a usage error's line masks."""
    with _lock:
        return list(_registered)


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


def _base64_forms(raw: bytes) -> set[str]:
    """The base64 text that encodes `raw` wherever it starts in a longer stream (three alignments, both alphabets)."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start, end = (8 * offset + 5) // 6, (8 * (offset + len(raw))) // 6
        piece = encoded[start:end]
        forms |= {piece, piece.replace("+", "-").replace("/", "_")}
    return forms


def _forms(secret: str) -> tuple[set[str], set[str]]:
    """(forms matched as they are, encoded forms that may also be wrapped over lines)."""
    raw = secret.encode("utf-8")
    plain = {secret, secret[::-1], codecs.encode(secret, "rot13"), quote(secret, safe=""), quote_plus(secret, safe="")}
    encoded = {raw.hex(), raw.hex().upper(), *_base64_forms(raw)}
    return plain, {form for form in encoded if len(form) >= MIN_SECRET_LENGTH}


@lru_cache(maxsize=64)
def _compiled(secrets: tuple[str, ...]) -> tuple[list[str], list[str], re.Pattern[str] | None]:
    plain, wrapped = set[str](), set[str]()
    for secret in secrets:
        forms, encoded = _forms(secret)
        plain |= forms
        wrapped |= encoded
    alternatives = [re.escape(form) for form in longest_first(plain)]
    alternatives += [r"(?:\r?\n)?".join(map(re.escape, form)) for form in longest_first(wrapped)]
    pattern = re.compile("|".join(alternatives)) if alternatives else None
    return sorted(plain), sorted(wrapped), pattern


def redact(text: str, secrets: list[str] | None = None, mask: str = MASK) -> str:
    """`text` with every form of every secret replaced (all known secrets when `secrets` is None)."""
    values = tuple(known_secrets() if secrets is None else longest_first(set(secrets)))
    if not values or not text:
        return text
    plain, wrapped, pattern = _compiled(values)
    if pattern is None:
        return text
    flat = text.replace("\n", "").replace("\r", "") if wrapped else text
    if not any(form in text for form in plain) and not any(form in flat for form in wrapped):
        return text  # the usual case, at the speed of `in`
    return pattern.sub(mask, text)


class RedactingFormatter(logging.Formatter):
    """Log lines with every known secret masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
