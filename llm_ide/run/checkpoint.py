"""Where a run's checkpoints live (SQLite, Postgres or memory), and their pruning."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from llm_ide.errors import CheckpointError, StoreLost
from llm_ide.run.channel_saver import ChannelSqliteSaver
from llm_ide.run.inline_saves import install as install_inline_saves
from llm_ide.run.pg_saver import ChannelPostgres, postgres_saver
from llm_ide.run.serde import MEMORY_TYPES, serializer

__all__ = ["MEMORY_TYPES", "ChannelSqliteSaver", "open_checkpointer", "prune", "serializer"]

# small pages: a commit rewrites every page it touches; a new database frees pages as the pruning deletes rows;
# one WAL checkpoint every 1.5 MB copies a page changed many times in between once, and the WAL file is cut back to
# that size after it (the run's folder stays near 2 MB while it runs)
SQLITE_PRAGMAS = [
    "page_size=1024",
    "auto_vacuum=INCREMENTAL",
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "wal_autocheckpoint=1500",
    "journal_size_limit=1600000",
]


STORES = ("postgres://", "postgresql://", "sqlite:")  # (or memory)


def check_store(spec: str, option: str = "--checkpoint") -> None:
    """A store of a kind there is (`option`: what the door used calls it), else a CheckpointError of one line."""
    if spec != "memory" and not spec.startswith(STORES):
        raise CheckpointError(f"{option} {spec}: unknown kind of store; use sqlite:PATH, postgres://… or memory")


@contextmanager
def open_checkpointer(spec: str | None, default_path: Path, keep_every: bool = False) -> Iterator[BaseCheckpointSaver]:
    """`sqlite:PATH` (default: `default_path`), `postgres://…`/`postgresql://…`, or `memory`; a store that cannot
    be opened is a CheckpointError (one line). `keep_every`: SQLite writes every checkpoint, none held (RERUNNABLE)."""
    spec = spec or f"sqlite:{default_path}"
    check_store(spec)
    if spec == "memory":
        yield InMemorySaver(serde=serializer())
    elif spec.startswith(STORES[:2]):
        with _postgres(spec) as saver:
            yield saver
    else:
        with _sqlite(Path(spec.removeprefix("sqlite:")).expanduser(), keep_every) as saver:
            yield saver


@contextmanager
def _postgres(url: str) -> Iterator[BaseCheckpointSaver]:
    try:
        from psycopg import Connection, OperationalError
        from psycopg.rows import dict_row

        saver_class = postgres_saver()
    except ImportError:
        raise CheckpointError("Postgres checkpoints need: pip install 'llm-ide[postgres]'") from None
    where = without_password(url)
    logging.getLogger("psycopg").setLevel(logging.ERROR)  # (a pipeline ended on a lost connection: the run says it)
    try:
        conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=10)
    except OperationalError as error:
        raise CheckpointError(f"the checkpoint store {where}: cannot connect: {_first_line(error)}") from None
    with conn:
        saver = saver_class(conn, serde=serializer())
        try:
            saver.setup()
        except OperationalError as error:
            raise CheckpointError(
                f"the checkpoint store {where}: cannot create the tables: {_first_line(error)}"
            ) from None
        yield saver


@contextmanager
def _sqlite(path: Path, keep_every: bool) -> Iterator[BaseCheckpointSaver]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except (OSError, sqlite3.Error) as error:
        raise CheckpointError(f"the checkpoint store sqlite:{path}: cannot open: {_first_line(error)}") from None
    try:
        try:
            for pragma in SQLITE_PRAGMAS:
                conn.execute(f"PRAGMA {pragma}")
            saver = ChannelSqliteSaver(conn, serde=serializer(), keep_every=keep_every)
            install_inline_saves()
            saver.setup()
            conn.execute("SELECT count(*) FROM checkpoints").fetchone()  # truncated or not a database: said here
        except sqlite3.Error as error:
            raise CheckpointError(
                f"the checkpoint store sqlite:{path}: not a usable database: {_first_line(error)}"
            ) from None
        try:
            yield saver
        finally:
            with contextlib.suppress(sqlite3.Error):  # what was held and deferred (a full disk: the last commit stands)
                saver.commit()
    finally:
        conn.close()


def store_lost(spec: str, error: BaseException) -> StoreLost | None:
    """A run's error that is its Postgres store lost (its connection broken, none to be had): one line naming the
    store, and why a new connection fails now (else how the run's broke)."""
    if not spec.startswith(STORES[:2]):
        return None
    from psycopg import OperationalError

    if not isinstance(error, OperationalError):
        return None
    if why := out_of_reach(spec):
        return StoreLost(f"the checkpoint store {without_password(spec)} is out of reach: {why}")
    return StoreLost(f"the checkpoint store {without_password(spec)} broke the run's connection: {_first_line(error)}")


def out_of_reach(url: str) -> str:
    """Why a new connection to the Postgres store `url` fails ('' when one is had)."""
    from psycopg import OperationalError, connect

    try:
        connect(url, connect_timeout=10).close()
    except OperationalError as error:
        return _first_line(error)
    return ""


def without_password(url: str) -> str:
    parsed = urlsplit(url)
    if parsed.password is None:
        return url
    return urlunsplit(parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@")))


def _first_line(error: BaseException) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


NEWEST = (
    "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
    "checkpoint_ns ORDER BY checkpoint_id DESC) AS position FROM checkpoints WHERE thread_id = ?) WHERE position <= ?"
)


def prune(saver: BaseCheckpointSaver, thread_id: str, keep: int = 2) -> None:
    """Keep only the newest checkpoints of a thread, so that storage grows with the state, not with its history: the
    newest `keep` of each namespace (a subgraph under way keeps its own, and the graph's stay beside them)."""
    if isinstance(saver, SqliteSaver):
        if isinstance(saver, ChannelSqliteSaver):
            saver.flush()
        with saver.lock:
            newest = saver.conn.execute(NEWEST, (thread_id, keep)).fetchall()
            kept = {(ns, checkpoint_id) for ns, checkpoint_id, _, _ in newest}
            rows = saver.conn.execute(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).fetchall()
            saver.conn.executemany(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                [(thread_id, ns, checkpoint_id) for ns, checkpoint_id in rows if (ns, checkpoint_id) not in kept],
            )
            saver.conn.execute(
                "DELETE FROM writes WHERE thread_id = ? AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                "c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns AND "
                "c.checkpoint_id = writes.checkpoint_id)",
                (thread_id,),
            )
            if isinstance(saver, ChannelSqliteSaver):
                live = {
                    (ns, channel, str(version))
                    for ns, _, kind, checkpoint in newest
                    for channel, version in saver.serde.loads_typed((kind, checkpoint))["channel_versions"].items()
                }
                stale = [
                    (thread_id, ns, channel, version)
                    for ns, channel, version in saver.conn.execute(
                        "SELECT checkpoint_ns, channel, version FROM blobs WHERE thread_id = ?", (thread_id,)
                    )
                    if (ns, channel, version) not in live
                ]
                saver.conn.executemany(
                    "DELETE FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?", stale
                )
                saver.prune_parts(thread_id)
            saver.conn.commit()
            saver.conn.executescript("PRAGMA incremental_vacuum;")  # the pages freed go (auto_vacuum)
            # and the file shrinks to what is kept now, not at the next automatic checkpoint (which would copy the
            # pages of every checkpoint since this pruning first, and leave the file at that size): the WAL is
            # copied into it, only the pages kept, and starts over
            saver.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    elif isinstance(saver, ChannelPostgres):
        saver.prune([thread_id], strategy="keep_latest")
