from __future__ import annotations

from typing import Any


class Record:
    """Mixin for the memory dataclasses: `_asdict` is LangGraph's serializer's fast path (a shallow field dict,
    rebuilt with the class's constructor) and a cheap way to JSON-encode them."""

    __slots__ = ()

    def _asdict(self) -> dict[str, Any]:
        return dict(self.__dict__)
