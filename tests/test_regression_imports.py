"""The regression tests chosen for a patch are the test files that import the edited module, whatever the form of the
import; a module of the same name elsewhere (another package, the tests' own helper) is no reason to run a file. Real
git repositories, the local environment's own commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import make_git_repo

from llm_ide.environments.local import LocalEnvironment
from llm_ide.reproduction.regression import touching

PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def f():\n    return 1\n",
    "pkg/other.py": "X = 2\n",
    "pkg/tests/__init__.py": "",
    "otherpkg/__init__.py": "",
    "otherpkg/mod.py": "def f():\n    return 3\n",
    "tests/__init__.py": "",
    "tests/mod.py": "def helper():\n    return 4\n",
    # Decoys: a `mod` that is not pkg/mod.py, a name that only holds the word, a word in a comment.
    "tests/test_decoy.py": (
        "from otherpkg import mod\nimport otherpkg.mod as m\nfrom .mod import helper\nfrom pkg import other\n"
        "# pkg.mod is tested elsewhere\n\ndef test_decoy():\n    assert mod.f() == m.f() == helper() - 1\n"
    ),
}


def chosen(tmp_path: Path, files: dict[str, str], edited: list[str], limit: int = 10) -> list[str]:
    repo = make_git_repo(tmp_path / "repo", {**PACKAGE, **files})
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    try:
        return touching(env, edited, limit)
    finally:
        env.close()


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("tests/test_user.py", "from pkg import mod\n"),
        ("tests/test_user.py", "from pkg import other, mod as renamed\n"),
        ("tests/test_user.py", "import pkg.mod as m\n"),
        ("tests/test_user.py", "import os, pkg.mod\n"),
        ("tests/test_user.py", "from pkg.mod import f\n"),
        ("tests/test_user.py", "from pkg import (\n    other,\n    mod,\n)\n"),
        ("tests/test_user.py", "from pkg.mod import (\n    f,\n)\n"),
        ("tests/test_user.py", "def test_late():\n    from pkg import mod\n    assert mod.f()\n"),
        ("pkg/test_user.py", "from . import mod\n"),
        ("pkg/test_user.py", "from .mod import f\n"),
        ("pkg/tests/test_user.py", "from .. import mod\n"),
        ("pkg/tests/test_user.py", "from ..mod import f\n"),
        ("tests/test_user.py", 'from pkg import (other,\n    mod)\nprint "python 2"\n'),  # unparsable: by pattern
    ],
    ids=[
        "from-pkg-import-mod",
        "from-pkg-import-several-renamed",
        "import-pkg-mod-as",
        "import-several",
        "from-pkg-mod-import-name",
        "parenthesised-multi-line",
        "parenthesised-from-module",
        "inside-a-function",
        "relative-from-dot-import-mod",
        "relative-from-dot-mod-import",
        "relative-two-levels",
        "relative-two-levels-module",
        "python2-syntax",
    ],
)
def test_every_import_form_of_the_edited_module_is_found(tmp_path: Path, where: str, source: str) -> None:
    assert chosen(tmp_path, {where: source}, ["pkg/mod.py"]) == [where]


def test_named_files_come_first_then_importers_then_files_only_named_and_the_limit_holds(tmp_path: Path) -> None:
    files = {
        "tests/test_mod.py": "def test_plain():\n    assert True\n",  # named exactly: first, import or not
        "tests/test_mod_extra.py": "from pkg import mod\n",  # named and importing
        "tests/test_a_user.py": "import pkg.mod\n",
        "tests/test_b_user.py": "from pkg.mod import f\n",
        "tests/test_mod_notes.py": "X = 1\n",  # only named: after every importer
    }
    everything = chosen(tmp_path, files, ["pkg/mod.py", "README.md"])
    assert everything == [
        "tests/test_mod.py",
        "tests/test_mod_extra.py",
        "tests/test_a_user.py",
        "tests/test_b_user.py",
        "tests/test_mod_notes.py",
    ]
    (tmp_path / "again").mkdir()
    assert chosen(tmp_path / "again", files, ["pkg/mod.py"], limit=3) == everything[:3]


def test_a_package_init_is_the_package(tmp_path: Path) -> None:
    files = {
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "Y = 1\n",
        "tests/test_pkg_sub.py": "from pkg import sub\n",
        "tests/test_leaf.py": "from pkg.sub.leaf import Y\n",  # a module inside the package imports it too
        "tests/test_unrelated.py": "from pkg import mod\n",
    }
    assert chosen(tmp_path, files, ["pkg/sub/__init__.py"]) == ["tests/test_pkg_sub.py", "tests/test_leaf.py"]


def test_a_src_layout_and_a_top_level_module(tmp_path: Path) -> None:
    files = {
        "src/lib/__init__.py": "",
        "src/lib/fields.py": "F = 1\n",
        "tools.py": "T = 1\n",
        "tests/test_schema.py": "from lib import (\n    fields,\n)\n",
        "tests/test_dataclasses.py": "from dataclasses import fields\n",
        "tests/test_cli_tools.py": "import tools\n",
    }
    assert chosen(tmp_path, files, ["src/lib/fields.py", "tools.py"]) == [
        "tests/test_cli_tools.py",  # named after `tools` (and importing it)
        "tests/test_schema.py",
    ]


def test_on_a_real_repository_the_importers_of_requests_modules(tmp_path: Path, shared_dir: Path) -> None:
    """psf/requests at an instance's base: its tests import `from requests import compat`, `from requests.compat
    import (...)` over several lines, and `from .utils import ...` (their own helper, not requests/utils.py)."""
    repo = tmp_path / "requests"
    bundle = shared_dir / "data" / "repos" / "psf__requests.bundle"
    subprocess.run(["git", "clone", "-q", str(bundle), str(repo), "-b", "psf__requests-6028"], check=True)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    try:
        assert touching(env, ["requests/compat.py"], 10) == ["tests/test_requests.py", "tests/test_utils.py"]
        assert touching(env, ["requests/utils.py"], 10) == ["tests/test_utils.py"]
        assert touching(env, ["requests/hooks.py"], 10) == ["tests/test_hooks.py", "tests/test_requests.py"]
        assert touching(env, ["requests/structures.py", "docs/conf.py"], 2) == [
            "tests/test_structures.py",
            "tests/test_requests.py",
        ]
    finally:
        env.close()
