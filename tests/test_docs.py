"""The README and docs/ hold together: every link leads to a file of the repository, no text points outside it, and
every environment variable the program reads is documented; the local-model session docs/local-models.md shows is what
`llm-ide run` prints against the loopback server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, single_call
from conftest import make_git_repo
from first_week_support import llm_ide
from openai_server import OpenAIServer

from llm_ide.config import load_config
from llm_ide.swebench.preflight import PROVIDER_KEYS, PROVIDER_URLS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
READS = re.compile(r"""(?:environ(?:\.get)?\(|environ\[|getenv\(|env_float\()\s*["']([A-Z][A-Z0-9_]+)["']""")
NAMED = re.compile(r"""^[A-Z_]*VARIABLE\s*=\s*["']([A-Z][A-Z0-9_]+)["']""", re.M)
CITED_PATH = re.compile(r"`((?:llm_ide|tests|scripts|docs|prompts)/[\w./*<>-]*)(?::[\w-]+)?`")
CITED_TEST = re.compile(r"`(?:tests/[\w/]+\.py::)?(test_\w{20,})`")
CITED_SETTING = re.compile(r"`([a-z_]+(?:\.[\w-]+)+)(?:[:=][^`]*)?`")
ELSEWHERE = {"tests/test_blueprints.py"}  # flask's (pallets__flask-5014), not ours
FORMER_SETTINGS = {"memory.cached_price"}  # 0922c50's, named in benchmarks of old against new
FREE_FORM = ("model.kwargs.", "environment.env.")  # keys of the user's choosing


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_lead_to_files_of_the_repository(page: Path) -> None:
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.S))  # code is no link
    for target, anchor in LINK.findall(prose):
        if "://" in target:
            continue
        path = (page.parent / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{page.name}: broken link {target}"
        if anchor:
            headers = {"#" + re.sub(r"[^a-z0-9 -]", "", line.lstrip("# ").lower()).replace(" ", "-")
                       for line in path.read_text().splitlines() if line.startswith("#")}  # fmt: skip
            assert anchor in headers, f"{page.name}: no section {anchor} in {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_text_points_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    for outside in ("../shared", "shared/data", "shared/seeds", "SPEC", "/work/"):
        assert outside not in text, f"{page.name} mentions {outside}"


PLACEHOLDERS = {"architecture.md": {"task"}}  # a name the prose stands for, as `model=...` is


@pytest.mark.parametrize(
    "page", [page for page in PAGES if "```python" in page.read_text()], ids=lambda page: page.name
)
def test_a_pages_python_blocks_name_only_what_they_import_or_define(page: Path, tmp_path: Path) -> None:
    program = tmp_path / f"{page.stem}.py"  # the page's blocks in order: a later one goes on from an earlier one
    program.write_text("\n".join(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)))
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821", "--output-format", "json"]
    found = subprocess.run([*ruff, str(program)], capture_output=True, text=True, check=False)
    undefined = {re.sub(r"Undefined name `(.+)`", r"\1", issue["message"]) for issue in json.loads(found.stdout)}
    assert undefined == PLACEHOLDERS.get(page.name, set()), f"{page.name}: its Python uses {sorted(undefined)} unset"


def test_the_readme_is_what_a_newcomer_reads_in_five_minutes() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.split()) <= 1600
    sections = re.findall(r"^## (.+)$", readme, re.M)
    assert sections == [
        "Install",
        "First run",
        "Concepts",
        "Commands",
        "Where to go next",
        "Architecture",
        "How it works",
    ]
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))
    assert linked == {page.name for page in PAGES[1:]}, "every docs page is linked from the README"


def program_variables() -> set[str]:
    names: set[str] = set()
    for source in (ROOT / "llm_ide").rglob("*.py"):
        text = source.read_text()
        names |= set(READS.findall(text)) | set(NAMED.findall(text))
    names |= {name for group in PROVIDER_KEYS.values() for name in group}
    names |= {name for group, _ in PROVIDER_URLS.values() for name in group}
    return names - {"PATH"}


def test_every_environment_variable_the_program_reads_is_documented() -> None:
    found = program_variables()
    assert {"LLM_IDE_MODEL", "LLM_IDE_CONFIG", "LLM_IDE_TOOLS_CACHE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= found
    documented = (ROOT / "docs" / "configuration.md").read_text()
    assert sorted(name for name in found if f"`{name}`" not in documented) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_files_and_tests_a_page_cites_exist(page: Path) -> None:
    text = page.read_text()
    for cited in sorted(set(CITED_PATH.findall(text)) - ELSEWHERE):
        pattern = re.sub(r"<[^>]*>", "*", f"llm_ide/{cited}" if cited.startswith("prompts/") else cited)
        assert next(ROOT.glob(pattern), None) if "*" in pattern else (ROOT / pattern).exists(), f"{page.name}: {cited}"
    tests = "\n".join(source.read_text() for source in (ROOT / "tests").glob("*.py"))
    for name in set(CITED_TEST.findall(text)):
        assert f"def {name}(" in tests, f"{page.name}: no test {name}"


def setting_names() -> set[str]:
    def names(data: object, prefix: str = "") -> set[str]:
        items = data.items() if isinstance(data, dict) else ()
        return {name for key, value in items for name in {prefix + key, *names(value, f"{prefix}{key}.")}}

    return names(load_config("default").model_dump()) | names(load_config("swebench").model_dump())


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_settings_a_page_names_exist(page: Path) -> None:
    known = setting_names()
    sections = {name for name in known if "." not in name}
    named = {name for name in CITED_SETTING.findall(page.read_text()) if name.split(".")[0] in sections}
    unknown = {name for name in named - known - FORMER_SETTINGS if not name.startswith(FREE_FORM)}
    unknown = {name for name in unknown if not re.search(r"\.(py|yaml|log|json)$|^swebench\.harness\.", name)}
    assert sorted(unknown) == [], f"{page.name} names settings there are not"


def test_the_configuration_page_names_every_settings_section() -> None:
    listed = (ROOT / "docs" / "configuration.md").read_text().split("## What there is to set", 1)[1].split("\n## ")[0]
    sections = {name for name in setting_names() if "." not in name} - {"swebench"}  # swebench.md: its own config
    assert sorted(name for name in sections if f"`{name}`" not in listed) == []


@pytest.mark.parametrize("page", [page for page in PAGES if "## Settings (`" in page.read_text()], ids=lambda p: p.name)
def test_a_settings_table_lists_its_sections_keys_with_their_defaults(page: Path) -> None:
    section = re.search(r"^## Settings \(`(\w+):`\)$", page.read_text(), re.M)[1]
    table = page.read_text().split(f"## Settings (`{section}:`)", 1)[1].split("\n## ")[0]
    defaults = getattr(load_config("default"), section).model_dump()
    rows = [
        (re.findall(r"`(\w+)`", keys), values.split(","))
        for keys, values in re.findall(r"^\| (`.+?) \| (.+?) \|", table, re.M)
    ]
    listed = {key for keys, _ in rows for key in keys}
    assert listed == set(defaults), f"{page.name}'s table of {section}: {sorted(listed ^ set(defaults))}"
    for keys, values in rows:
        for key, value in zip(keys, [value.strip() for value in values], strict=False):
            if isinstance(defaults[key], bool | int | float) and len(values) == len(keys):
                said = {"true": True, "false": False}.get(value, value)
                assert float(said) == defaults[key], f"{page.name}: {section}.{key} is {defaults[key]}, not {value}"


def transcript_lines(text: str) -> list[str]:
    """A run's step and end lines, the token counts and a test's seconds left out (they move with every prompt)."""
    steps, _, end = text.partition("\npatch (")
    kept = [line for line in steps.splitlines() if re.match(r"step |         ", line)] + re.findall(
        "submitted after .*", end
    )
    return [re.sub(r"\d[\d,+]* tokens|in \d+\.\d+s", "…", line.rstrip()) for line in kept]


def test_the_local_model_session_on_its_page_is_what_the_command_prints(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "local-models.md").read_text()
    shown = next(block for block in re.findall(r"```text\n(.*?)```", page, re.S) if "--thread-id first-local" in block)
    make_git_repo(tmp_path / "myproject", BUGGY_FILES)
    (tmp_path / "no-tools.yaml").write_text("environment: {tools: []}\n")
    with OpenAIServer(replies=single_call(FIX_SCRIPT), models=["qwen2.5-coder-7b"]) as server:
        args = [
            "--model",
            "qwen2.5-coder-7b",
            "--base-url",
            server.url,
            "--thread-id",
            "first-local",
            "-c",
            "no-tools.yaml",
        ]
        done = llm_ide("run", "--repo", "./myproject", "--task", "Cart.total ignores quantities", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert transcript_lines(done.stdout) == transcript_lines(shown)
    assert len(transcript_lines(shown)) == 17 and "✗ a failed alternative" in shown  # every step's lines compared
