"""A batch run again (local environment, no docker): --redo-existing with a checkpoint store outside the run
folders."""

from __future__ import annotations

from pathlib import Path

from swebench_fixtures import FIX_COMMAND, WRONG_COMMAND, build_dataset, write_config, write_script

from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.store import read_preds


def test_redo_existing_with_a_shared_checkpoint_store_runs_the_instance_afresh(tmp_path: Path) -> None:
    """The threads of --checkpoint sqlite:PATH (or postgres) outlive the run folders: a redone instance resumed its
    finished thread, and preds.json got the old patch again with the new model's name."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    options = BatchOptions(
        model=write_script(tmp_path / "wrong.yaml", [WRONG_COMMAND]),
        output=tmp_path / "out",
        environment="local",
        config_files=[write_config(tmp_path / "c.yaml")],
        checkpoint=f"sqlite:{tmp_path / 'threads.sqlite'}",
    )
    first = run_swebench(str(dataset), "test", options)
    assert first.counts() == {"submitted": 1}
    assert "README.md" in read_preds(options.output)[row["instance_id"]]["model_patch"]

    options.model, options.redo_existing = write_script(tmp_path / "fix.yaml", [FIX_COMMAND]), True
    redo = run_swebench(str(dataset), "test", options)
    assert redo.counts() == {"submitted": 1}
    assert read_preds(options.output)[row["instance_id"]]["model_patch"] == row["patch"]
