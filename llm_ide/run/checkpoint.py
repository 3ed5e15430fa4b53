from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

MEMORY_TYPES = [
    ("llm_ide.state.context", "Activity"),
    ("llm_ide.state.context", "Chunk"),
    ("llm_ide.state.context", "Scope"),
    ("llm_ide.state.operations", "OperationNode"),
    ("llm_ide.state.operations", "Reflection"),
]


def serializer() -> JsonPlusSerializer:
    """LangGraph's checkpoint serializer, with the memory models allowed by name."""
    return JsonPlusSerializer(allowed_msgpack_modules=MEMORY_TYPES)


@contextmanager
def open_checkpointer(spec: str | None, default_path: Path) -> Iterator[BaseCheckpointSaver]:
    """`sqlite:PATH` (default: `default_path`), `postgres://…`/`postgresql://…`, or `memory`."""
    spec = spec or f"sqlite:{default_path}"
    if spec == "memory":
        yield InMemorySaver(serde=serializer())
    elif spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise ValueError("Postgres checkpoints need: pip install 'llm-ide[postgres]'") from None
        from psycopg import Connection
        from psycopg.rows import dict_row

        with Connection.connect(spec, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
            saver = PostgresSaver(conn, serde=serializer())
            saver.setup()
            yield saver
    elif spec.startswith("sqlite:"):
        path = Path(spec.removeprefix("sqlite:")).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            saver = SqliteSaver(conn, serde=serializer())
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        raise ValueError(f"unknown checkpoint spec {spec!r}: use sqlite:PATH, postgres://… or memory")


def prune(saver: BaseCheckpointSaver, thread_id: str, keep: int = 2) -> None:
    """Keep only the newest checkpoints of a thread, so that storage grows with the state, not with its history."""
    if isinstance(saver, SqliteSaver):
        with saver.lock:
            saver.conn.execute(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id NOT IN "
                "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT ?)",
                (thread_id, thread_id, keep),
            )
            saver.conn.execute(
                "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN "
                "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?)",
                (thread_id, thread_id),
            )
            saver.conn.commit()
    elif type(saver).__name__ == "PostgresSaver":
        saver.prune([thread_id], strategy="keep_latest")
