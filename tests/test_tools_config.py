from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llm_ide.tools.config import TOOLS_DIR, ToolConfigError, available_tools, load_tool_config, load_tools

VALID = {
    "tool_name": "demo",
    "version": "1.0",
    "source": "pkg",
    "py_standalone": None,
    "installation": "pip",
    "setup_script": "echo {{ workdir }}",
    "executable": "demo",
    "usage": "`{{ invocation }} ARG` does the demo.",
}


def write_tool(folder: Path, data: dict, name: str = "demo") -> Path:
    (folder / "pkg").mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_valid_config_resolves_source_relative_to_the_yaml(tmp_path: Path) -> None:
    tool = load_tool_config(write_tool(tmp_path, VALID))
    assert (tool.tool_name, tool.version, tool.source, tool.py_standalone) == ("demo", "1.0", tmp_path / "pkg", None)
    assert (tool.installation, tool.executable, tool.first_usage_line) == ("pip", "demo", VALID["usage"])
    absolute = load_tool_config(write_tool(tmp_path, {**VALID, "source": str(tmp_path / "pkg")}))
    assert absolute.source == tmp_path / "pkg"


def test_python_version_stays_text(tmp_path: Path) -> None:
    """`py_standalone: 3.10` unquoted is the version 3.10, not the number 3.1; `version: 2` is the text "2"."""
    path = tmp_path / "demo.yaml"
    path.write_text(
        "tool_name: demo\nversion: 2\nsource: null\npy_standalone: 3.10\ninstallation: pip\n"
        "setup_script: null\nexecutable: demo\nusage: u\n"
    )
    tool = load_tool_config(path)
    assert (tool.py_standalone, tool.version, tool.source, tool.setup_script) == ("3.10", "2", None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"extra": 1},
            "unknown key `extra` (allowed keys: tool_name, version, source, py_standalone, installation, "
            "check_script, setup_script, executable, usage)",
        ),
        ({"usage": None}, "key `usage`: Input should be a valid string"),
        ({"installation": "conda"}, "key `installation`: unsupported value 'conda' (supported: pip)"),
        ({"source": "missing-folder"}, "key `source`: folder not found: {tmp}/missing-folder"),
        ({"py_standalone": "three"}, "key `py_standalone`: 'three' is not a Python version (e.g. '3.11')"),
        ({"setup_script": "{% if %}"}, "key `setup_script`: not a template Jinja can parse: Expected an expression"),
        ({"check_script": "{{ x"}, "key `check_script`: not a template Jinja can parse: unexpected end of template"),
        ({"source": None, "version": None}, "`version` is required when `source` is null"),
        ({"tool_name": "other"}, "key `tool_name`: 'other' does not match the file name 'demo.yaml'"),
    ],
)
def test_invalid_config_names_the_file_and_the_key(tmp_path: Path, change: dict, message: str) -> None:
    path = write_tool(tmp_path, {**VALID, **change})
    with pytest.raises(ToolConfigError) as error:
        load_tool_config(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message.format(tmp=tmp_path) in str(error.value)


@pytest.mark.parametrize("key", ["tool_name", "version", "source", "py_standalone", "setup_script", "usage"])
def test_each_missing_key_is_named(tmp_path: Path, key: str) -> None:
    path = write_tool(tmp_path, {name: value for name, value in VALID.items() if name != key})
    with pytest.raises(ToolConfigError) as error:
        load_tool_config(path)
    assert str(error.value) == f"{path}: missing key `{key}`"


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    data = {name: value for name, value in VALID.items() if name != "executable"} | {"installation": "npm", "x": 1}
    path = write_tool(tmp_path, data)
    with pytest.raises(ToolConfigError) as error:
        load_tool_config(path)
    problems = str(error.value).removeprefix(f"{path}: ").split("; ")
    assert problems[0] == "key `installation`: unsupported value 'npm' (supported: pip)"
    assert problems[1:] == [
        "missing key `executable`",
        "unknown key `x` (allowed keys: tool_name, version, source, py_standalone, installation, check_script, "
        "setup_script, executable, usage)",
    ]


def test_not_a_mapping_and_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "demo.yaml").write_text("- a\n- b\n")
    with pytest.raises(ToolConfigError, match=r"demo\.yaml: expected a mapping with the keys tool_name, version"):
        load_tool_config(tmp_path / "demo.yaml")
    (tmp_path / "demo.yaml").write_text("tool_name: [\n")
    with pytest.raises(ToolConfigError, match=r"demo\.yaml: not valid YAML"):
        load_tool_config(tmp_path / "demo.yaml")


def test_load_tools_by_name_and_path(tmp_path: Path) -> None:
    write_tool(tmp_path, VALID)
    write_tool(tmp_path, {**VALID, "tool_name": "other", "source": None}, name="other")
    assert [tool.tool_name for tool in load_tools(["other", "demo"], tmp_path)] == ["other", "demo"]
    assert [tool.tool_name for tool in load_tools([str(tmp_path / "demo.yaml")])] == ["demo"]
    with pytest.raises(
        ToolConfigError, match=r"unknown tool 'nope': .*nope\.yaml not found \(available: demo, other\)"
    ):
        load_tools(["nope"], tmp_path)
    with pytest.raises(ToolConfigError, match="tool 'demo' is listed twice"):
        load_tools(["demo", str(tmp_path / "demo.yaml")], tmp_path)


def test_bundled_tools_are_valid() -> None:
    assert available_tools() == ["debugger", "navigator"]
    debugger, navigator = load_tools(["debugger", "navigator"])
    assert (debugger.source, debugger.py_standalone, debugger.executable) == (
        TOOLS_DIR / "packages" / "debugger",
        None,
        "debugger",
    )
    assert (navigator.source, navigator.py_standalone, navigator.executable) == (
        TOOLS_DIR / "packages" / "navigator",
        "3.11",
        "navigator",
    )
