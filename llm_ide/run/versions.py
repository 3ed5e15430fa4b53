"""What the two savers (SQLite, Postgres) share: short channel versions, and which values stay inline in a checkpoint's
row and which are stored apart, once per version."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions

INLINE_STR = 128  # longer strings (the task) are stored once per version, not in every checkpoint row


def inline(value: Any) -> bool:
    return (
        value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) < INLINE_STR)
    )


def short_version(current: str | int | None, channel: None = None) -> str:
    """A channel's next version: the number zero-padded to 10 digits and 8 random hex digits (a fork's versions do
    not collide with the branch it left), not LangGraph's 32 digits and a random float: a checkpoint lists ~40 of
    them. Still above every longer version of a thread checkpointed before (zero-padded to 32 digits)."""
    number = 0 if current is None else current if isinstance(current, int) else int(current.split(".")[0])
    return f"{number + 1:010}.{random.getrandbits(32):08x}"


class StoredApart:
    """The version of each channel whose value a saver stored apart from its checkpoint rows, per thread and
    namespace. A row written before (another rule of what stays inline, an older program) may hold the value inline:
    a value not known to be stored apart at its version is stored (an existing row left as it is) by the first
    checkpoint that keeps it apart, though that checkpoint does not change it."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str, str], str] = {}

    @staticmethod
    def _where(config: RunnableConfig) -> tuple[str, str]:
        return str(config["configurable"]["thread_id"]), str(config["configurable"].get("checkpoint_ns", ""))

    def to_store(
        self, config: RunnableConfig, channels: Iterable[str], versions: ChannelVersions, new: ChannelVersions
    ) -> ChannelVersions:
        """`new`, and the version of each of `channels` not known to be stored in `config`'s thread and namespace."""
        where = self._where(config)
        unknown = [k for k in channels if k not in new and self._versions.get((*where, k)) != str(versions[k])]
        return {**new, **{k: versions[k] for k in unknown}}

    def stored(self, config: RunnableConfig, channels: Iterable[str], versions: ChannelVersions) -> None:
        where = self._where(config)
        self._versions.update({(*where, k): str(versions[k]) for k in channels if k in versions})

    def forget(self, thread_id: str) -> None:
        for key in [key for key in self._versions if key[0] == thread_id]:
            del self._versions[key]
