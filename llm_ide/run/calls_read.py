"""A run's calls log (run/trajectory.py) read back: every record flushed before its writer stopped (a killed run's last
gzip member is incomplete), each prompt whole again, a torn or foreign line left out; and the uncompressed log of
llm-ide 0.1. Read when a run resumes, and by whatever shows a finished run's calls."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

GZIP = 31  # zlib's wbits for a gzip container
CHUNK = 1 << 16
SHARED = "prompt_shared"  # a logged prompt is what follows the first SHARED characters of the previous record's


def read_log(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """The records of a log and whether its last gzip member is complete (not so after a kill): every record
    flushed before the writer stopped is read; a torn last line is left out."""
    text, damaged = bytearray(), False
    data = path.read_bytes()
    unzip, fed = zlib.decompressobj(GZIP), 0
    while fed < len(data):
        piece = data[fed : fed + CHUNK]
        fed += len(piece)
        try:
            text += unzip.decompress(piece)
        except zlib.error:  # damaged data: keep what came before it
            damaged = True
            break
        if unzip.eof:  # the next member, if any, starts in the unused bytes
            data, fed = unzip.unused_data + data[fed:], 0
            unzip = zlib.decompressobj(GZIP)
    complete = not damaged and fed == 0  # nothing in an unfinished member
    return parse_records(bytes(text).split(b"\n")), complete


def parse_records(lines: list[bytes] | list[str]) -> list[dict[str, Any]]:
    """The call records among JSON lines, their prompts whole again; a torn or foreign line is left out."""
    records: list[dict[str, Any]] = []
    previous = ""
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("index"), int):
            if isinstance(shared := record.pop(SHARED, None), int) and isinstance(record.get("prompt"), str):
                record["prompt"] = previous[:shared] + record["prompt"]
            previous = record["prompt"] if isinstance(record.get("prompt"), str) else previous
            records.append(record)
    return records


def plain_records(path: Path) -> list[dict[str, Any]]:
    """The records of an uncompressed JSON-lines log (written by llm-ide 0.1 before the gzip log)."""
    return parse_records(path.read_text(encoding="utf-8", errors="replace").splitlines())
