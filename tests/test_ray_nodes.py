"""`--engine ray` on a cluster whose node lacks llm-ide: one line before any instance runs."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from ray_cluster import ray_cluster
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config, write_script

pytestmark = pytest.mark.slow

LAUNCHER = "#!{python}\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n"


def ray_without_llm_ide(root: Path) -> Path:
    """`ray` of a venv that sees this one's packages (a path in a .pth file: its own .pth files, llm-ide's editable
    install among them, are not read) but not llm-ide."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "these.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ray = root / "bin" / "ray"
    ray.write_text(LAUNCHER.format(python=root / "bin" / "python"))
    ray.chmod(0o755)
    return ray


def test_a_node_without_llm_ide_is_one_line_before_any_instance_runs(tmp_path: Path) -> None:
    """Each instance sent there failed as `error` with the head of Ray's traceback as its reason."""
    data, _ = build_dataset(tmp_path / "data", 2)
    model = write_script(tmp_path / "m.yaml", [FIX_COMMAND])
    args = ["swebench", "--subset", str(data), "--split", "test", "--model", model, "--environment", "local",
            "-c", str(write_config(tmp_path / "c.yaml")), "-o", str(tmp_path / "out"), "--engine", "ray"]  # fmt: skip
    with ray_cluster(tmp_path / "ray", [{}], ray=str(ray_without_llm_ide(tmp_path / "venv"))) as cluster:
        command = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args, "--address", cluster.address]
        env = {**os.environ, **cluster.env}
        batch = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert batch.returncode == 2, batch.stdout + batch.stderr
    said = " ".join(batch.stderr.split())
    lacks = "cannot run llm-ide (ModuleNotFoundError: No module named 'llm_ide'): pip install 'llm-ide[ray]' on every"
    assert lacks in said, said
    assert len(batch.stderr.strip().splitlines()) == 1, batch.stderr
    assert not (tmp_path / "out" / "preds.json").exists() and "started" not in batch.stdout
