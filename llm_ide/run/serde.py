"""The checkpoints' serializer: LangGraph's, with the memory models allowed by name, large values compressed and the
operations encoded node by node (each node once)."""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from functools import cached_property
from hashlib import blake2b
from typing import Any, NamedTuple

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from llm_ide.state.context import Activity, Chunk
from llm_ide.state.operations import OperationNode

MEMORY_TYPES = [
    ("llm_ide.errors", "ExitStatus"),
    ("llm_ide.state.context", "Activity"),
    ("llm_ide.state.context", "Chunk"),
    ("llm_ide.state.context", "Scope"),
    ("llm_ide.state.operations", "OperationNode"),
]


COMPRESS_OVER = 1024  # bytes
# an operation node is compressed once for good (each version once, kept in `parts` while listed): harder, and from
# a quarter of the size (its thought, action and observation: a node of 1 KiB loses a third)
NODE_COMPRESS_OVER, NODE_LEVEL = 256, 6
RECENT = 16  # large encodings kept for the checkpoint that follows the writes
NODES = 4096  # operation nodes whose encoding is kept
ZLIB = "+zlib"
CHUNKS = "chunks"  # the code context's own encoding (_chunks_data)


class PartRef(NamedTuple):
    """A large value stored once in the SQLite saver's `parts`, as its type `ref` and its digest read back (the saver
    then reads the value)."""

    digest: bytes


REF = "ref"


class PartList(NamedTuple):
    """The operations as the SQLite saver stores them (a node's write, a checkpoint's blob), as its type `parts` and
    its nodes' digests read back (the saver then reads the nodes)."""

    digests: bytes


PARTS = "parts"


class Text(NamedTuple):
    """A string a saver stores as a blob, not inline in its checkpoint rows: encoded as the string itself (it reads
    back as a `str`)."""

    value: str


class Part:
    """An operation node as the SQLite saver stores it, once per content: LangGraph's msgpack encoding of the node;
    its digest (8 bytes of BLAKE2b) and stored form (msgpack+zlib over 256 bytes, when that is smaller) made when
    first asked: only the SQLite saver asks, once per node it has not stored."""

    def __init__(self, node: OperationNode, kind: str, raw: bytes) -> None:
        self.node, self.kind, self.raw = node, kind, raw

    @cached_property
    def digest(self) -> bytes:
        return blake2b(self.raw, digest_size=8).digest()

    @cached_property
    def stored(self) -> tuple[str, bytes]:
        packed = zlib.compress(self.raw, NODE_LEVEL) if len(self.raw) > NODE_COMPRESS_OVER else self.raw
        return (self.kind + ZLIB, packed) if len(packed) < len(self.raw) else (self.kind, self.raw)


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer; a value whose encoding is over 1 KiB (the operations, the code context, the workspace)
    is stored zlib-compressed under the type `<type>+zlib`: checkpoints write a fraction of the bytes.

    A step's large values are serialized twice, as the node's writes and as the checkpoint's new channel versions:
    the encoding of the last few large objects is kept (by identity, with the object itself so that the id is not
    reused; state values are never changed in place) and the second time reuses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recent: OrderedDict[int, tuple[Any, tuple[str, bytes]]] = OrderedDict()
        self._nodes: OrderedDict[int, Part] = OrderedDict()
        self._lock = threading.Lock()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if type(obj) is Text:
            obj = obj.value
        with self._lock:
            hit = self._recent.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if isinstance(obj, list) and len(obj) > 1 and all(type(item) is OperationNode for item in obj):
            kind, data = "msgpack", self._node_list(obj)
        elif isinstance(obj, list) and obj and all(type(item) is Chunk for item in obj):
            kind, data = CHUNKS, _chunks_data(obj)
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
        return b"".join([_array_header(len(nodes)), *(part.raw for part in self.node_parts(nodes))])

    def node_parts(self, nodes: list[OperationNode]) -> list[Part]:
        """Each node's encoding, digest and stored form, computed once per node object."""
        parts = []
        for node in nodes:
            with self._lock:
                hit = self._nodes.get(id(node))
            if hit is None or hit.node is not node:
                hit = Part(node, *super().dumps_typed(node))
                with self._lock:
                    self._nodes[id(node)] = hit
                    while len(self._nodes) > NODES:
                        self._nodes.popitem(last=False)
            parts.append(hit)
        return parts

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == REF:
            return PartRef(payload)
        if kind == PARTS:
            return PartList(payload)
        if kind.endswith(ZLIB):
            kind, payload = kind.removesuffix(ZLIB), zlib.decompress(payload)
        return _chunks_of(payload) if kind == CHUNKS else super().loads_typed((kind, payload))


def _chunks_data(chunks: list[Chunk]) -> bytes:
    """The code context as msgpack rows, each activity history as bytes when its entries fit (they are 0 or 1 and
    small counts): a tenth of the time of the generic encoding, whose cost grows with chunks × operations. (A
    bytearray is made in half the time of bytes from a list, and msgpack writes both as the same `bin`.)"""
    rows = []
    for c in chunks:
        a = c.activity
        try:
            accessed, referred = bytearray(a.accessed), bytearray(a.referred)
        except ValueError:  # a count over 255
            accessed, referred = _compact(a.accessed), _compact(a.referred)
        row = (c.file_path, c.lines, c.class_name, c.function, c.whole_function, c.created, accessed, referred)
        rows.append((*row, a.score, a.scored))
    return ormsgpack.packb(rows)


def _compact(entries: list[int]) -> bytearray | list[int]:
    try:
        return bytearray(entries)
    except ValueError:
        return entries


def _chunks_of(data: bytes) -> list[Chunk]:
    return [
        Chunk(path, lines, cls, fn, whole, Activity(list(accessed), list(referred), score, scored), created)
        for path, lines, cls, fn, whole, created, accessed, referred, score, scored in ormsgpack.unpackb(data)
    ]


def _array_header(length: int) -> bytes:
    """msgpack's array header (fixarray, array 16, array 32)."""
    if length < 16:
        return bytes([0x90 | length])
    return b"\xdc" + length.to_bytes(2, "big") if length < 1 << 16 else b"\xdd" + length.to_bytes(4, "big")


def serializer() -> JsonPlusSerializer:
    """LangGraph's checkpoint serializer, with the memory models allowed by name and large values compressed."""
    return CompressingSerializer(allowed_msgpack_modules=MEMORY_TYPES)
