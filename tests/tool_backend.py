"""The build backend of the test tools' packages (test_tools_install.write_package copies it beside their
pyproject.toml, `backend-path = ["."]`): the two hooks pip calls for an editable install, with the standard library
only. pip runs each hook in a new process, and setuptools' take ~0.8 s of CPU a build, these ~0.1 s; the tests that
use it are about the installer, the tool cache and its checks, not the backend (the debugger and the slow standalone
tool build with setuptools)."""

from __future__ import annotations

import base64
import hashlib
import os
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(os.path.abspath(__file__)).parent


def dist_info() -> tuple[str, str, dict[str, str]]:
    """The distribution's name (as in a wheel's file name), its version, and its .dist-info's files."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name, version = project["name"].replace("-", "_"), project["version"]
    requires = [f"Requires-Dist: {requirement}\n" for requirement in project.get("dependencies", [])]
    scripts = [f"{script} = {target}\n" for script, target in project.get("scripts", {}).items()]
    return (
        name,
        version,
        {
            "METADATA": f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n" + "".join(requires),
            "WHEEL": "Wheel-Version: 1.0\nGenerator: tool_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            "entry_points.txt": "[console_scripts]\n" + "".join(scripts),
        },
    )


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: object = None) -> str:
    name, version, files = dist_info()
    folder = Path(metadata_directory) / f"{name}-{version}.dist-info"
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder.name


def build_editable(wheel_directory: str, config_settings: object = None, metadata_directory: object = None) -> str:
    """A wheel of the metadata and a .pth putting the source's `src` on the path."""
    name, version, files = dist_info()
    info = f"{name}-{version}.dist-info"
    contents = {f"{name}.pth": f"{ROOT / 'src'}\n", **{f"{info}/{file}": text for file, text in files.items()}}
    records = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        records.append(f"{path},sha256={digest},{len(text.encode())}\n")
    contents[f"{info}/RECORD"] = "".join(records) + f"{info}/RECORD,,\n"
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
    return wheel
