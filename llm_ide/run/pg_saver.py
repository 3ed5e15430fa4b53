"""The Postgres checkpointer: LangGraph's, with a long string stored once per version, not in each checkpoint row.
LangGraph's Postgres saver is an optional dependency (`llm-ide[postgres]`): the class is made on first use."""

from __future__ import annotations

from functools import cache
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata

from llm_ide.kills import failpoint
from llm_ide.run.serde import Text
from llm_ide.run.versions import INLINE_STR, StoredApart, short_version


class ChannelPostgres(BaseCheckpointSaver):
    """What ours adds to LangGraph's Postgres saver. LangGraph keeps a string inline in the checkpoint row (JSONB),
    and a step writes six rows: a string of INLINE_STR characters or more (the task, the memory's snapshot, the
    worktree's patch) goes to `checkpoint_blobs` instead, once per version, and reads back through LangGraph's own join
    on the row's versions. A row written before, with the string inline, still reads; the first row this saver writes
    after it stores the string apart (StoredApart). Also: short channel versions, the `checkpoint.writes` failpoint."""

    get_next_version = staticmethod(short_version)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.apart = StoredApart()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        values = checkpoint["channel_values"]
        texts = {k for k, v in values.items() if isinstance(v, str) and len(v) >= INLINE_STR}
        versions = self.apart.to_store(config, texts, checkpoint["channel_versions"], new_versions)
        apart = {k: Text(v) if k in texts else v for k, v in values.items()}
        saved = super().put(config, {**checkpoint, "channel_values": apart}, metadata, versions)
        self.apart.stored(config, texts, versions)
        return saved

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        failpoint("checkpoint.writes")  # a step's writes are saved, its checkpoint row may not be

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        self.apart.forget(str(thread_id))


@cache
def postgres_saver() -> type[Any]:
    """ChannelPostgres on LangGraph's PostgresSaver (an ImportError without `llm-ide[postgres]`)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class ChannelPostgresSaver(ChannelPostgres, PostgresSaver):
        pass

    return ChannelPostgresSaver
