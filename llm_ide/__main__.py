"""`python -m llm_ide`: the `llm-ide` command."""

from llm_ide.cli import app

app()
