"""The kernel's keyrings: a key in llm-ide's session keyring (a Kerberos ticket, a token a tool keeps there) is not a
sandboxed command's to read. Each command used to inherit llm-ide's session keyring and `keyctl read` its keys."""

from __future__ import annotations

import ctypes
import platform
import uuid
from pathlib import Path

import pytest
from conftest import make_git_repo, require_bwrap

from llm_ide.environments import LocalEnvironment, processes

SESSION, JOIN, REVOKE = -3, 1, 3  # KEY_SPEC_SESSION_KEYRING; keyctl's operations
KEYCTL, ADD_KEY = {"x86_64": 250, "aarch64": 219}, {"x86_64": 248, "aarch64": 217}  # system call numbers
# every key of the session keyring, its user keyring's and its user session keyring's, read
READ_KEYS = """import ctypes, struct
libc = ctypes.CDLL(None)
buffer = ctypes.create_string_buffer(65536)
for ring in (-3, -4, -5):
    size = libc.syscall({keyctl}, 11, ring, buffer, 65536)
    for key in struct.unpack("%di" % (size // 4), buffer.raw[:size]) if size > 0 else ():
        length = libc.syscall({keyctl}, 11, key, buffer, 65536)
        print(ring, key, buffer.raw[: max(length, 0)].decode(errors="replace"))
print("keys-read")
"""


def test_a_command_reads_no_key_of_llm_ides_session_keyring(tmp_path: Path) -> None:
    require_bwrap()
    keyctl = KEYCTL.get(platform.machine())
    if keyctl is None:
        pytest.skip(f"no keyctl system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    # this thread's own session keyring first: the key goes nowhere another process of the machine would look
    if libc.syscall(keyctl, JOIN, None) < 0:
        pytest.skip("keyctl is not allowed here")
    secret = f"keyring-secret-{uuid.uuid4().hex}"
    key = libc.syscall(ADD_KEY[platform.machine()], b"user", b"llm-ide-test", secret.encode(), len(secret), SESSION)
    assert key > 0, ctypes.get_errno()
    script = tmp_path / "read_keys.py"
    script.write_text(READ_KEYS.format(keyctl=keyctl))
    try:
        with LocalEnvironment(make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}), tools_dir=tmp_path / "t") as env:
            done = env.execute(f"python3 {script}", timeout=60)
    finally:
        libc.syscall(keyctl, REVOKE, key)
    assert "keys-read" in done.output and secret not in done.output, done.output


@pytest.mark.parametrize(
    ("machine", "pointer", "number"),
    [("x86_64", 8, 250), ("aarch64", 8, 219), ("x86_64", 4, None), ("aarch64", 4, 311), ("i686", 4, 288)],
)
def test_keyctls_number_is_the_processs_abi_not_the_kernels(machine: str, pointer: int, number: int | None) -> None:
    """`uname -m` names the kernel: a 32-bit Python on a 64-bit kernel (Raspberry Pi OS's armhf on its aarch64
    kernel) makes the 32-bit ABI's system calls, where aarch64's 219 is mincore: it failed, and every command with it;
    x86_64's is either i386's or x32's, not known (the keyring stays shared there, as where no number is known)."""
    assert processes.KEYCTL.get((machine, pointer)) == number


ADD_KEY_SCRIPT = """import ctypes
secret = {secret!r}.encode()
print("added", ctypes.CDLL(None).syscall({add_key}, b"user", secret, secret, len(secret), -3))
"""


def test_a_key_a_command_adds_is_not_the_next_runs_nor_kept_by_llm_ide(tmp_path: Path) -> None:
    """The Python API and the Studio server run one run after another (and several at once) in one process: every
    command joined that process's one keyring, so a key a command of one run added there was the next run's to read
    (and stayed as long as the process)."""
    require_bwrap()
    keyctl, add_key = KEYCTL.get(platform.machine()), ADD_KEY.get(platform.machine())
    if keyctl is None or add_key is None:
        pytest.skip(f"no keyctl system call number known for {platform.machine()}")
    secret = f"run-a-secret-{uuid.uuid4().hex}"
    (tmp_path / "add.py").write_text(ADD_KEY_SCRIPT.format(secret=secret, add_key=add_key))
    (tmp_path / "read.py").write_text(READ_KEYS.format(keyctl=keyctl))
    outputs = []
    for name, script in (("a", "add.py"), ("b", "read.py")):
        repo = make_git_repo(tmp_path / name, {"a.py": "x = 1\n"})
        with LocalEnvironment(repo, tools_dir=tmp_path / f"tools-{name}") as env:
            outputs.append(env.execute(f"python3 {tmp_path / script}", timeout=60).output)
    added, read = outputs
    if "added -1" in added:
        pytest.skip("keyctl is not allowed in the sandbox here")
    assert "keys-read" in read and secret not in read, read
