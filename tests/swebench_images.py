"""The suite's docker images, built with the docker SDK and cached by their content's hash (no registry): pytest and its
dependencies on the base image, and an instance's image holding its repository at the base commit (recommitted
with the same identity and dates, so the same hash)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from conftest import BASE_IMAGE

PYTEST_IMAGE = "llm-ide-test/pytest"
HASH_LABEL = "llm-ide.test-hash"


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}  # fixed identity and dates: the base commit has the same hash on the host and in the image


def pytest_files() -> dict[str, Path]:
    """Installed files of pytest and its dependencies (pure Python), relative to site-packages."""
    from packaging.requirements import Requirement

    wanted, seen, files = ["pytest"], set(), {}
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            if file.parts[0] != ".." and "__pycache__" not in file.parts:
                files[str(file)] = Path(dist.locate_file(file))
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return files


def _context(files: dict[str, Path | bytes], dockerfile: str) -> tuple[bytes, str]:
    digest = hashlib.sha256(dockerfile.encode())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(files):
            source = files[name]
            data = source if isinstance(source, bytes) else source.read_bytes()
            digest.update(name.encode() + b"\0" + data)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    return buffer.getvalue(), digest.hexdigest()[:16]


def build_image(client: Any, tag: str, files: dict[str, Path | bytes], dockerfile: str, extra_tags: list[str]) -> str:
    """Build (cached by content hash) with the docker SDK; no registry access. The image of ours (HASH_LABEL) the tag
    named before goes once it has no tag left, unless a container or another image still uses it."""
    import docker.errors

    context, digest = _context(files, dockerfile)
    try:
        replaced = client.images.get(tag)
        if replaced.labels.get(HASH_LABEL) == digest:
            for other in extra_tags:
                replaced.tag(other)
            return tag
    except docker.errors.ImageNotFound:
        replaced = None
    image, _ = client.images.build(
        fileobj=io.BytesIO(context),
        custom_context=True,
        tag=tag,
        rm=True,
        forcerm=True,
        pull=False,
        labels={HASH_LABEL: digest},
    )
    for other in extra_tags:
        image.tag(other)
    if replaced is not None and HASH_LABEL in replaced.labels and replaced.id != image.id:
        with contextlib.suppress(docker.errors.APIError):  # (in use, a parent, or gone already: another worker's)
            if not client.images.get(replaced.id).tags:
                client.images.remove(replaced.id)
    return tag


def pytest_image(client: Any) -> str:
    files: dict[str, Path | bytes] = {f"site/{name}": path for name, path in pytest_files().items()}
    dockerfile = (
        f"FROM {BASE_IMAGE}\nCOPY site/ /usr/local/lib/python3.11/dist-packages/\n"
        "RUN ln -sf /usr/bin/python3 /usr/local/bin/python && python -m pytest --version\n"
    )
    return build_image(client, f"{PYTEST_IMAGE}:latest", files, dockerfile, [])


def repo_files(repo: Path) -> dict[str, Path | bytes]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    return {f"repo/{name}": repo / name for name in listed.decode().split("\0") if name}


def instance_dockerfile(base_image: str, base_commit: str) -> str:
    """/testbed holds the repository at its base commit (recommitted in the image with the same hash)."""
    env = " ".join(f"{key}={value}" for key, value in GIT_ENV.items())
    return (
        f"FROM {base_image}\nCOPY repo/ /testbed/\nWORKDIR /testbed\n"
        f"RUN git init -q -b main && git add -A && {env} git commit -q -m base"
        f' && test "$(git rev-parse HEAD)" = {base_commit} && git config --global --add safe.directory /testbed\n'
    )
