"""The suite's image builder (swebench_images.build_image): an image it builds anew under a tag (a new content
hash) replaces the one the tag named, which went on as an untagged image of ours at each rebuild; now it is removed,
unless it still has a tag. An image not of ours (no HASH_LABEL) is never removed."""

from __future__ import annotations

import contextlib
import io
import os

import docker.errors
import pytest
from conftest import BASE_IMAGE, base_image_client
from swebench_images import HASH_LABEL, build_image

pytestmark = pytest.mark.docker

DOCKERFILE = f"FROM {BASE_IMAGE}\nCOPY a /a\n"


@pytest.mark.parametrize(
    ("ours", "also_tagged", "kept"),
    [(True, False, False), (False, False, True), (True, True, True)],
    ids=["ours", "a-users", "ours-tagged-elsewhere"],
)
def test_a_rebuilt_test_image_removes_the_one_it_replaces(ours: bool, also_tagged: bool, kept: bool) -> None:
    client = base_image_client()
    tag = f"llm-ide-test/replaced-{os.urandom(4).hex()}:latest"
    other, old = tag.replace(":latest", ":other"), None
    try:
        if ours:
            build_image(client, tag, {"a": tag.encode()}, DOCKERFILE, [other] if also_tagged else [])
        else:
            dockerfile = f"FROM {BASE_IMAGE}\nLABEL user={tag}\n".encode()
            client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, forcerm=True)
        old = client.images.get(tag)
        assert (HASH_LABEL in old.labels) == ours
        build_image(client, tag, {"a": tag.encode() + b"-changed"}, DOCKERFILE, [])
        assert client.images.get(tag).id != old.id
        assert (old.id in client.api.images(all=True, quiet=True)) == kept  # (ids: another test's removal races a get)
    finally:
        for name in (tag, other, old and old.id):
            with contextlib.suppress(docker.errors.APIError):
                if name:
                    client.images.remove(name)
