"""A thread's run guard, intent log and keep in Postgres, for runs that may resume on another machine (a Ray batch):
the advisory lock replaces the run folder's file lock, the `llm_ide_intents` table its `intents.jsonl`, the
`llm_ide_kept` table the files its models keep there (a scripted model's place; made when a model first keeps
something: a batch of models that keep nothing has no empty table, with its index and TOAST index, in the database)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from llm_ide.errors import CheckpointError
from llm_ide.run.checkpoint import open_checkpointer

INTENTS_TABLE = """CREATE TABLE IF NOT EXISTS llm_ide_intents (
    thread_id TEXT NOT NULL, node_id INTEGER NOT NULL, action TEXT NOT NULL, started TIMESTAMPTZ DEFAULT now(),
    PRIMARY KEY (thread_id, node_id))"""
KEPT_TABLE = """CREATE TABLE IF NOT EXISTS llm_ide_kept (
    thread_id TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (thread_id, name))"""


def is_postgres(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(("postgres://", "postgresql://"))


def prepare_postgres(url: str) -> None:
    """The checkpoint and intent tables, made once before a batch's runs start: their concurrent creation on a fresh
    database races (a duplicate key in LangGraph's migrations table)."""
    import psycopg

    with open_checkpointer(url, Path(os.devnull)):
        pass
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(INTENTS_TABLE)
    except psycopg.Error as error:
        raise CheckpointError(f"postgres intents table: {' '.join(str(error).split())[:300]}") from None


class PostgresThread:
    """Held for one run of `thread_id`: a session advisory lock (a second holder waits until the first one's
    connection is gone, e.g. its node died), the thread's intents, each committed before its operation runs, and its
    keep (llm_ide/keep.py), each write committed before the model's reply is used."""

    def __init__(self, url: str, thread_id: str) -> None:
        import psycopg

        self.thread_id = thread_id
        self._lock = threading.Lock()
        try:
            self.conn = psycopg.connect(url, autocommit=True)
            self.conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7151))", (f"llm-ide:{thread_id}",))
            self.conn.execute(INTENTS_TABLE)
            self._kept = self._exists("llm_ide_kept")
            if not self._has_checkpoint():  # a thread started afresh: what an earlier, deleted one left goes
                self.conn.execute("DELETE FROM llm_ide_intents WHERE thread_id = %s", (thread_id,))
                if self._kept:
                    self.conn.execute("DELETE FROM llm_ide_kept WHERE thread_id = %s", (thread_id,))
            rows = self.conn.execute("SELECT node_id FROM llm_ide_intents WHERE thread_id = %s", (thread_id,))
            self._started = {row[0] for row in rows.fetchall()}
        except psycopg.Error as error:
            raise CheckpointError(f"postgres intents of {thread_id}: {' '.join(str(error).split())[:300]}") from None

    def _exists(self, table: str) -> bool:
        exists = self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        return bool(exists and exists[0])

    def _has_checkpoint(self) -> bool:
        if not self._exists("checkpoints"):
            return False
        found = self.conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = %s LIMIT 1", (self.thread_id,))
        return found.fetchone() is not None

    def started_before(self, node_id: int) -> bool:
        return node_id in self._started

    def begin(self, node_id: int, action_type: str) -> None:
        with self._lock:
            self.conn.execute(
                "INSERT INTO llm_ide_intents (thread_id, node_id, action) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (self.thread_id, node_id, action_type),
            )
            self._started.add(node_id)

    def lines(self, name: str) -> list[str]:
        with self._lock:
            self._kept = self._kept or self._exists("llm_ide_kept")
            if not self._kept:
                return []
            row = self.conn.execute(
                "SELECT body FROM llm_ide_kept WHERE thread_id = %s AND name = %s", (self.thread_id, name)
            ).fetchone()
        return row[0].splitlines() if row else []

    def write(self, name: str, lines: list[str], append: bool = True) -> None:
        body = "".join(f"{line}\n" for line in lines)
        with self._lock:
            if not self._kept:
                with self.conn.transaction():  # runs of a batch that start at once: one creates the table
                    self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('llm-ide:kept', 7151))")
                    self.conn.execute(KEPT_TABLE)
                self._kept = True
            self.conn.execute(
                "INSERT INTO llm_ide_kept (thread_id, name, body) VALUES (%s, %s, %s) ON CONFLICT (thread_id, name) "
                "DO UPDATE SET body = CASE WHEN %s THEN llm_ide_kept.body ELSE '' END || EXCLUDED.body",
                (self.thread_id, name, body, append),
            )

    def close(self) -> None:
        self.conn.close()  # the advisory lock goes with the session

    def __enter__(self) -> PostgresThread:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
