"""The SQLite checkpointer: each channel value stored once per version, commits only before what calls out, and a
checkpoint that only such nodes follow held until the next one passes it over."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from hashlib import blake2b
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from llm_ide.errors import CheckpointError
from llm_ide.kills import failpoint
from llm_ide.run.serde import COMPRESS_OVER, PARTS, REF, ZLIB, CompressingSerializer, Part, PartList, PartRef
from llm_ide.run.versions import StoredApart, inline, short_version
from llm_ide.state.operations import OperationNode

# Nodes that call nothing outside (no model call, no action): after a kill they are simply run again, with the same
# result. Their writes, and a checkpoint row that only such nodes follow, are committed with the next commit (before
# a node that calls out starts, with its writes, at the end of an operation: `commit`, at the end of the run), not on
# their own: a step commits 5 times, not 12, and no transaction stays open during a model call or an action. Such a
# checkpoint row, and its tasks' writes, are held in memory, not written: the next checkpoint, whose values hold those
# writes, passes it over (its parent is then the held one's), unless a read, a commit or the end comes first. A step
# writes 3 checkpoints, not 6, and the writes of the two nodes that call out (unless every checkpoint is kept).
RERUNNABLE = frozenset({"render_context", "branch", "update_activity"})
# Nodes that call nothing once a channel holds what they would ask for: `act` when the step's one reply (read by
# `reflect`, its writes committed) already holds the action.
RERUNNABLE_WITH = {"act": "proposed"}
NEXT = "branch:to:"  # LangGraph's trigger channel of the node an edge leads to
CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"


# PARTS: the operations (a node's write, a blob) as the digests (8 bytes each) of their nodes, stored once each in
# `parts`; and a large value (the code context) is stored once in `parts`, its node's write and its blob typed REF
DIGEST = 8
NULL = ("null", b"")  # LangGraph's serializer's encoding of None
BATCH = 500  # digests per query (SQLite's limit on a statement's parameters)


@dataclass
class Held:
    """A checkpoint that only nodes calling nothing outside follow, not written yet (or written by a commit or a
    read), and its tasks' writes, not written yet."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    versions: ChannelVersions  # the channels changed since the last checkpoint written
    writes: list[tuple[RunnableConfig, Any, str, str]] = field(default_factory=list)
    written: bool = False


def _node_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(type(item) is OperationNode for item in value)


def _rerunnable(node: str, values: dict[str, Any]) -> bool:
    return node in RERUNNABLE or (node in RERUNNABLE_WITH and values.get(RERUNNABLE_WITH[node]) is not None)


def _only_rerunnable(values: dict[str, Any]) -> bool:
    """Nodes follow the checkpoint of `values`, and none of them calls anything outside."""
    following = [k.removeprefix(NEXT) for k in values if k.startswith(NEXT)]
    return bool(following) and all(_rerunnable(node, values) for node in following)


def _saved_config(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
    conf = config["configurable"]
    where = {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")}
    return {"configurable": {**where, "checkpoint_id": checkpoint["id"]}}


class ChannelSqliteSaver(SqliteSaver):
    """SQLite checkpoints that store each channel value once per version, like LangGraph's Postgres saver: a step
    serializes only the channels it changed, not the whole state at each of the graph's six super-steps. The
    operations' blob lists its nodes' digests, each node stored once in `parts` (a step adds one or two nodes, not the
    whole tree). Commits: see RERUNNABLE."""

    serde: CompressingSerializer
    get_next_version = staticmethod(short_version)  # type: ignore[assignment]

    def __init__(self, *args: Any, keep_every: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep_every = keep_every  # every checkpoint written (time travel), none held
        self._held: Held | None = None
        self._passed: deque[str] = deque(maxlen=64)  # checkpoints held and passed over: their writes are not kept
        self._holding = threading.RLock()  # taken before `lock`
        self._deferring = threading.local()
        self._rerunnable: tuple[str | None, frozenset[str]] = (None, frozenset())
        self.apart = StoredApart()
        self._parts: dict[tuple[str, str], set[bytes]] = {}  # the node digests stored, per thread and namespace

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
        """Commit what was deferred and held (an operation ended: the trajectory written next must not be ahead of
        it)."""
        self.flush()
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
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS parts (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', "
            "digest BLOB NOT NULL, type TEXT, value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, digest))"
        )
        self.conn.commit()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """SqliteSaver's, with each value that is not inline stored apart once per version (`blobs`), in the same
        transaction as the checkpoint's row; held instead when only nodes that call nothing outside follow it."""
        with self._holding:
            held, self._held = self._held, None
            if held is not None and config["configurable"].get("checkpoint_id") == held.checkpoint["id"]:
                self._passed.append(held.checkpoint["id"])
                if not held.written:
                    config, new_versions = held.config, {**held.versions, **new_versions}
            elif held is not None:  # another thread's or namespace's
                self._write_held(held)
            if self.keep_every or not _only_rerunnable(checkpoint["channel_values"]):
                return self._write(config, checkpoint, metadata, new_versions)
            self._held = Held(config, checkpoint, metadata, new_versions)
            return _saved_config(config, checkpoint)

    def flush(self) -> None:
        """Write what is held (uncommitted: see RERUNNABLE); the writes that follow are still held."""
        with self._holding:
            if self._held is not None:
                self._write_held(self._held)

    def _write_held(self, held: Held) -> None:
        if not held.written:
            self._write(held.config, held.checkpoint, held.metadata, held.versions)
        for config, writes, task_id, task_path in held.writes:
            self._write_writes(config, writes, task_id, task_path)
        held.written, held.writes = True, []

    def _write(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
    ) -> RunnableConfig:
        values, conf = checkpoint["channel_values"], config["configurable"]
        stored = {k: v for k, v in values.items() if not inline(v)}
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        versions = self.apart.to_store(config, stored, checkpoint["channel_versions"], versions)
        kind, data = self.serde.dumps_typed(
            {**checkpoint, "channel_values": {k: v for k, v in values.items() if k not in stored}}
        )
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore")
        following = [k.removeprefix(NEXT) for k in values if k.startswith(NEXT)]
        rerunnable = {node for node in following if _rerunnable(node, values)}
        self._rerunnable = (checkpoint["id"], frozenset(rerunnable))  # durability "sync": before its tasks' writes
        row = (str(thread_id), ns, checkpoint["id"], conf.get("checkpoint_id"), kind, data, meta)
        with self._deferred(bool(following) and len(rerunnable) == len(following)), self.cursor() as cur:
            cur.executemany(
                "INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (thread_id, ns, k, str(version))
                    + (self._blob(cur, thread_id, ns, stored[k]) if k in stored else ("empty", None))
                    for k, version in versions.items()
                    if k in stored or k not in values
                ],
            )
            cur.execute(f"INSERT OR REPLACE INTO checkpoints ({CHECKPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        self.apart.stored(config, stored, versions)
        return _saved_config(config, checkpoint)

    def _blob(self, cur: sqlite3.Cursor, thread_id: str, ns: str, value: Any) -> tuple[str, bytes]:
        """How a value (a blob, a write) is stored: the operations, and the nodes a step writes (its pending node, the
        nodes it changed), by their nodes' digests, each node stored once in `parts` and encoded once (a step adds
        one or two, not the tree); a small node as it is; else as `_stored`."""
        if value is None:
            return NULL
        if type(value) is OperationNode:
            part = self.serde.node_parts([value])[0]
            if len(part.raw) <= COMPRESS_OVER:
                return part.kind, part.raw
            self._insert_parts(cur, thread_id, ns, [part])
            return REF, part.digest
        if not _node_list(value):
            return self._stored(cur, thread_id, ns, value)
        parts = self.serde.node_parts(value)
        self._insert_parts(cur, thread_id, ns, parts)
        return PARTS, b"".join(part.digest for part in parts)

    def _insert_parts(self, cur: sqlite3.Cursor, thread_id: str, ns: str, parts: list[Part]) -> None:
        known = self._parts.setdefault((str(thread_id), str(ns)), set())
        new = [part for part in parts if part.digest not in known]
        cur.executemany(
            "INSERT OR IGNORE INTO parts VALUES (?, ?, ?, ?, ?)",
            [(thread_id, ns, part.digest, *part.stored) for part in new],
        )
        known.update(part.digest for part in new)

    def _stored(self, cur: sqlite3.Cursor, thread_id: str, ns: str, value: Any) -> tuple[str, bytes]:
        """A large value by its digest, stored once in `parts` (a node's write and its checkpoint's blob of the same
        value refer to one row), a small one as it is."""
        kind, data = self.serde.dumps_typed(value)
        if not kind.endswith(ZLIB):  # encoded in 1 KiB or less
            return kind, data
        digest = blake2b(data, digest_size=DIGEST).digest()
        cur.execute("INSERT OR IGNORE INTO parts VALUES (?, ?, ?, ?, ?)", (thread_id, ns, digest, kind, data))
        return REF, digest

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        """SqliteSaver's, with a large value stored once in `parts` and referred to (its checkpoint's blob refers to
        it too); held with their checkpoint, or dropped with it when the next one passed it over (its values hold
        them)."""
        checkpoint_id = config["configurable"].get("checkpoint_id")
        with self._holding:
            if checkpoint_id in self._passed:
                return
            if self._held is not None and checkpoint_id == self._held.checkpoint["id"]:
                self._held.writes.append((config, writes, task_id, task_path))
                return
            self._write_writes(config, writes, task_id, task_path)

    def _write_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str) -> None:
        node, (after, rerunnable) = task_path.rsplit(", ", 1)[-1], self._rerunnable
        conf = config["configurable"]
        key = (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"]), task_id)
        verb = "REPLACE" if all(channel in WRITES_IDX_MAP for channel, _ in writes) else "IGNORE"
        deferred = node in RERUNNABLE or (conf.get("checkpoint_id") == after and node in rerunnable)
        with self._deferred(deferred), self.cursor() as cur:
            rows = [
                (*key, task_path, WRITES_IDX_MAP.get(channel, index), channel, *self._blob(cur, *key[:2], value))
                for index, (channel, value) in enumerate(writes)
            ]
            cur.executemany(
                f"INSERT OR {verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
                "channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        failpoint("checkpoint.writes")  # a step's writes are saved, its checkpoint row may not be

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self.flush()
        found = super().get_tuple(config)
        return None if found is None else self._with_blobs(found)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        self.flush()
        for found in list(super().list(config, **kwargs)):  # the base class holds the lock while it iterates
            yield self._with_blobs(found)

    def _with_blobs(self, found: CheckpointTuple) -> CheckpointTuple:
        checkpoint = found.checkpoint
        values = dict(checkpoint["channel_values"])
        thread_id = found.config["configurable"]["thread_id"]
        ns = found.config["configurable"].get("checkpoint_ns", "")
        with self.cursor(transaction=False) as cur:
            parts = _Parts(cur, self.serde, thread_id, ns)
            for channel, version in checkpoint["channel_versions"].items():
                if channel in values:
                    continue
                row = cur.execute(
                    "SELECT type, value FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? "
                    "AND version = ?",
                    (thread_id, ns, channel, str(version)),
                ).fetchone()
                if row is not None and row[0] == PARTS:
                    values[channel] = parts.many(row[1])
                elif row is not None and row[0] != "empty":
                    values[channel] = parts.resolved(self.serde.loads_typed((row[0], row[1])))
            writes = [(task, channel, parts.resolved(value)) for task, channel, value in found.pending_writes or []]
        return found._replace(
            checkpoint={**checkpoint, "channel_values": values}, pending_writes=writes if found.pending_writes else None
        )

    def prune_parts(self, thread_id: str) -> None:
        """The parts no blob of the thread lists any more deleted (after the pruning of its blobs)."""
        live = {
            (ns, digests[at : at + DIGEST])
            for table in ("blobs", "writes")
            for ns, digests in self.conn.execute(
                f"SELECT checkpoint_ns, value FROM {table} WHERE thread_id = ? AND type IN (?, ?)",
                (thread_id, PARTS, REF),
            )
            for at in range(0, len(digests), DIGEST)
        }
        stored = self.conn.execute("SELECT checkpoint_ns, digest FROM parts WHERE thread_id = ?", (thread_id,))
        stale = [(thread_id, ns, digest) for ns, digest in stored if (ns, digest) not in live]
        self.conn.executemany("DELETE FROM parts WHERE thread_id = ? AND checkpoint_ns = ? AND digest = ?", stale)
        for _, ns, digest in stale:
            self._parts.get((str(thread_id), str(ns)), set()).discard(digest)

    def delete_thread(self, thread_id: str) -> None:
        self.flush()
        super().delete_thread(thread_id)
        self.apart.forget(str(thread_id))
        self._parts = {key: digests for key, digests in self._parts.items() if key[0] != str(thread_id)}
        with self.cursor() as cur:
            cur.execute("DELETE FROM blobs WHERE thread_id = ?", (str(thread_id),))
            cur.execute("DELETE FROM parts WHERE thread_id = ?", (str(thread_id),))


class _Parts:
    """The parts a checkpoint refers to, read by digest (a history of many checkpoints does not read all of them)."""

    def __init__(self, cur: sqlite3.Cursor, serde: CompressingSerializer, thread_id: str, ns: str) -> None:
        self.cur, self.serde, self.key = cur, serde, (thread_id, ns)

    def many(self, digests: bytes) -> list[Any]:
        wanted = [digests[at : at + DIGEST] for at in range(0, len(digests), DIGEST)]
        stored: dict[bytes, tuple[str, bytes]] = {}
        for start in range(0, len(wanted), BATCH):
            batch = wanted[start : start + BATCH]
            query = "SELECT digest, type, value FROM parts WHERE thread_id = ? AND checkpoint_ns = ? AND digest IN "
            rows = self.cur.execute(query + f"({', '.join('?' * len(batch))})", (*self.key, *batch))
            stored.update((digest, (kind, value)) for digest, kind, value in rows)
        if missing := [digest.hex() for digest in wanted if digest not in stored]:
            raise CheckpointError(f"the checkpoint of thread {self.key[0]} lacks stored values ({', '.join(missing)})")
        return [self.serde.loads_typed(stored[digest]) for digest in wanted]

    def resolved(self, value: Any) -> Any:
        if type(value) is PartList:
            return self.many(value.digests)
        return self.many(value.digest)[0] if type(value) is PartRef else value
