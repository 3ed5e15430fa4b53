"""The one error hierarchy: every error we raise on purpose is an `LlmIdeError` and reaches the user as one line."""

from __future__ import annotations


class LlmIdeError(Exception):
    """An error told to the user in one line; `exit_code` is the CLI's exit code for it."""

    exit_code = 1


class UsageError(LlmIdeError):
    """A bad input of the user (option, file, URL): exit code 2, before anything runs."""

    exit_code = 2


class ConfigError(UsageError, ValueError):
    """A configuration file or value that does not validate; the message names the file and the key path."""
