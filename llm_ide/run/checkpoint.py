from __future__ import annotations

import contextlib
import sqlite3
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from llm_ide.errors import CheckpointError
from llm_ide.faults import failpoint
from llm_ide.state.operations import OperationNode

MEMORY_TYPES = [
    ("llm_ide.errors", "ExitStatus"),
    ("llm_ide.state.context", "Activity"),
    ("llm_ide.state.context", "Chunk"),
    ("llm_ide.state.context", "Scope"),
    ("llm_ide.state.operations", "OperationNode"),
]


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
COMPRESS_OVER = 1024  # bytes
RECENT = 16  # large encodings kept for the checkpoint that follows the writes
NODES = 4096  # operation nodes whose encoding is kept
ZLIB = "+zlib"


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer; a value whose encoding is over 1 KiB (the operations, the code context, the workspace)
    is stored zlib-compressed under the type `<type>+zlib`: checkpoints write a fraction of the bytes.

    A step's large values are serialized twice, as the node's writes and as the checkpoint's new channel versions:
    the encoding of the last few large objects is kept (by identity, with the object itself so that the id is not
    reused; state values are never changed in place) and the second time reuses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recent: OrderedDict[int, tuple[Any, tuple[str, bytes]]] = OrderedDict()
        self._nodes: OrderedDict[int, tuple[OperationNode, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        with self._lock:
            hit = self._recent.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if isinstance(obj, list) and len(obj) > 1 and all(type(item) is OperationNode for item in obj):
            kind, data = "msgpack", self._node_list(obj)
        else:
            kind, data = super().dumps_typed(obj)
        if len(data) <= COMPRESS_OVER:
            return kind, data
        encoded = (kind + ZLIB, zlib.compress(data, 1))
        with self._lock:
            self._recent[id(obj)] = (obj, encoded)
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        return encoded

    def _node_list(self, nodes: list[OperationNode]) -> bytes:
        """The msgpack array of the operations, each node encoded once: a node is final once its reflection is on
        it (a new node object), so a step encodes one or two of them, not the whole tree."""
        parts = [_array_header(len(nodes))]
        for node in nodes:
            with self._lock:
                hit = self._nodes.get(id(node))
            if hit is None or hit[0] is not node:
                hit = (node, super().dumps_typed(node)[1])
                with self._lock:
                    self._nodes[id(node)] = hit
                    while len(self._nodes) > NODES:
                        self._nodes.popitem(last=False)
            parts.append(hit[1])
        return b"".join(parts)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind.endswith(ZLIB):
            return super().loads_typed((kind.removesuffix(ZLIB), zlib.decompress(payload)))
        return super().loads_typed(data)


def _array_header(length: int) -> bytes:
    """msgpack's array header (fixarray, array 16, array 32)."""
    if length < 16:
        return bytes([0x90 | length])
    return b"\xdc" + length.to_bytes(2, "big") if length < 1 << 16 else b"\xdd" + length.to_bytes(4, "big")


def serializer() -> JsonPlusSerializer:
    """LangGraph's checkpoint serializer, with the memory models allowed by name and large values compressed."""
    return CompressingSerializer(allowed_msgpack_modules=MEMORY_TYPES)


INLINE_STR = 1024


def _inline(value: Any) -> bool:
    return (
        value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) < INLINE_STR)
    )


# Nodes that call nothing outside (no model call, no action): after a kill they are simply run again, with the same
# result. Their writes, and a checkpoint row that only such nodes follow, are committed with the next commit (before
# a node that calls out starts, with its writes, at the end of an operation: `commit`, at the end of the run), not on
# their own: a step commits 5 times, not 12, and no transaction stays open during a model call or an action.
RERUNNABLE = frozenset({"render_context", "branch", "update_activity"})
# Nodes that call nothing once a channel holds what they would ask for: `act` when the step's one reply (read by
# `reflect`, its writes committed) already holds the action.
RERUNNABLE_WITH = {"act": "proposed"}
NEXT = "branch:to:"  # LangGraph's trigger channel of the node an edge leads to


def _rerunnable(node: str, values: dict[str, Any]) -> bool:
    return node in RERUNNABLE or (node in RERUNNABLE_WITH and values.get(RERUNNABLE_WITH[node]) is not None)


class ChannelSqliteSaver(SqliteSaver):
    """SQLite checkpoints that store each channel value once per version, like LangGraph's Postgres saver: a step
    serializes only the channels it changed, not the whole state at each of the graph's six super-steps. Commits:
    see RERUNNABLE."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferring = threading.local()
        self._rerunnable: tuple[str | None, frozenset[str]] = (None, frozenset())

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        with super().cursor(transaction=transaction and not getattr(self._deferring, "on", False)) as cur:
            yield cur

    @contextmanager
    def _deferred(self, on: bool = True) -> Iterator[None]:
        self._deferring.on = on
        try:
            yield
        finally:
            self._deferring.on = False

    def commit(self) -> None:
        """Commit what was deferred (an operation ended: the trajectory written next must not be ahead of it)."""
        with self.lock:
            self.conn.commit()

    def setup(self) -> None:
        if self.is_setup:
            return
        super().setup()
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS blobs (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', "
            "channel TEXT NOT NULL, version TEXT NOT NULL, type TEXT, value BLOB, "
            "PRIMARY KEY (thread_id, checkpoint_ns, channel, version))"
        )
        self.conn.commit()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        values = checkpoint["channel_values"]
        stored = {k: v for k, v in values.items() if not _inline(v)}
        rows = [
            (config["configurable"]["thread_id"], config["configurable"].get("checkpoint_ns", ""), k, str(version))
            + (self.serde.dumps_typed(stored[k]) if k in stored else ("empty", None))
            for k, version in new_versions.items()
            if k in stored or k not in values
        ]
        with self.cursor(transaction=False) as cur:  # committed with the checkpoint row below
            cur.executemany("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?)", rows)
        inline = {**checkpoint, "channel_values": {k: v for k, v in values.items() if k not in stored}}
        following = [k.removeprefix(NEXT) for k in values if k.startswith(NEXT)]
        rerunnable = {node for node in following if _rerunnable(node, values)}
        self._rerunnable = (checkpoint["id"], frozenset(rerunnable))  # durability "sync": before its tasks' writes
        with self._deferred(bool(following) and len(rerunnable) == len(following)):
            return super().put(config, inline, metadata, new_versions)

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        node, (after, rerunnable) = task_path.rsplit(", ", 1)[-1], self._rerunnable
        at = config["configurable"].get("checkpoint_id")
        with self._deferred(node in RERUNNABLE or (at == after and node in rerunnable)):
            super().put_writes(config, writes, task_id, task_path)
        failpoint("checkpoint.writes")  # a step's writes are saved, its checkpoint row may not be

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        return None if found is None else self._with_blobs(found)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        for found in list(super().list(config, **kwargs)):  # the base class holds the lock while it iterates
            yield self._with_blobs(found)

    def _with_blobs(self, found: CheckpointTuple) -> CheckpointTuple:
        checkpoint = found.checkpoint
        values = dict(checkpoint["channel_values"])
        thread_id = found.config["configurable"]["thread_id"]
        ns = found.config["configurable"].get("checkpoint_ns", "")
        with self.cursor(transaction=False) as cur:
            for channel, version in checkpoint["channel_versions"].items():
                if channel in values:
                    continue
                row = cur.execute(
                    "SELECT type, value FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? "
                    "AND version = ?",
                    (thread_id, ns, channel, str(version)),
                ).fetchone()
                if row is not None and row[0] != "empty":
                    values[channel] = self.serde.loads_typed((row[0], row[1]))
        return found._replace(checkpoint={**checkpoint, "channel_values": values})

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            cur.execute("DELETE FROM blobs WHERE thread_id = ?", (str(thread_id),))


@contextmanager
def open_checkpointer(spec: str | None, default_path: Path) -> Iterator[BaseCheckpointSaver]:
    """`sqlite:PATH` (default: `default_path`), `postgres://…`/`postgresql://…`, or `memory`; a store that cannot
    be opened is a CheckpointError (one line)."""
    spec = spec or f"sqlite:{default_path}"
    if spec == "memory":
        yield InMemorySaver(serde=serializer())
    elif spec.startswith(("postgres://", "postgresql://")):
        with _postgres(spec) as saver:
            yield saver
    elif spec.startswith("sqlite:"):
        with _sqlite(Path(spec.removeprefix("sqlite:")).expanduser()) as saver:
            yield saver
    else:
        raise CheckpointError(f"--checkpoint {spec}: unknown kind of store; use sqlite:PATH, postgres://… or memory")


def _with_failpoint(saver_class: type) -> type:
    """The saver with the `checkpoint.writes` failpoint after a step's writes are stored (as ChannelSqliteSaver)."""

    class Saver(saver_class):
        def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
            super().put_writes(config, writes, task_id, task_path)
            failpoint("checkpoint.writes")

    Saver.__name__ = saver_class.__name__  # prune() recognises the Postgres saver by name
    return Saver


@contextmanager
def _postgres(url: str) -> Iterator[BaseCheckpointSaver]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection, OperationalError
        from psycopg.rows import dict_row
    except ImportError:
        raise CheckpointError("Postgres checkpoints need: pip install 'llm-ide[postgres]'") from None
    where = _without_password(url)
    try:
        conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=10)
    except OperationalError as error:
        raise CheckpointError(f"--checkpoint {where}: cannot connect: {_first_line(error)}") from None
    with conn:
        saver = _with_failpoint(PostgresSaver)(conn, serde=serializer())
        try:
            saver.setup()
        except OperationalError as error:
            raise CheckpointError(f"--checkpoint {where}: cannot create the tables: {_first_line(error)}") from None
        yield saver


@contextmanager
def _sqlite(path: Path) -> Iterator[BaseCheckpointSaver]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except (OSError, sqlite3.Error) as error:
        raise CheckpointError(f"--checkpoint sqlite:{path}: cannot open: {_first_line(error)}") from None
    try:
        try:
            for pragma in SQLITE_PRAGMAS:
                conn.execute(f"PRAGMA {pragma}")
            saver = ChannelSqliteSaver(conn, serde=serializer())
            saver.setup()
            conn.execute("SELECT count(*) FROM checkpoints").fetchone()  # truncated or not a database: said here
        except sqlite3.Error as error:
            raise CheckpointError(f"--checkpoint sqlite:{path}: not a usable database: {_first_line(error)}") from None
        yield saver
    finally:
        with contextlib.suppress(sqlite3.Error):  # what was deferred (a full disk: the last commit stands)
            conn.commit()
        conn.close()


def _without_password(url: str) -> str:
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
            saver.conn.commit()
            saver.conn.executescript("PRAGMA incremental_vacuum;")  # the file shrinks to what is kept (auto_vacuum)
    elif type(saver).__name__ == "PostgresSaver":
        saver.prune([thread_id], strategy="keep_latest")
