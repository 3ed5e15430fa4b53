"""What the model client's tests share (test_models, test_models_pricing): a key that must never leak, a
conversation to send, the bundled `model:` settings made fast."""

from __future__ import annotations

from llm_ide.config import load_config
from llm_ide.settings import ModelSettings

SECRET = "sk-test-" + "S3cr3tK3yValue" * 3
MESSAGES = [
    {"role": "system", "content": "You are careful."},
    {"role": "user", "content": "Fix the bug in calc.py."},
    {"role": "assistant", "content": "<thought>look first</thought>"},
    {"role": "user", "content": "Observation: 1 failed"},
]


def fast_settings() -> ModelSettings:
    """The bundled `model:` section with delays and timeouts small enough for fast tests."""
    return load_config(
        model={"timeout": 0.5, "max_retries": 2, "retry_base_delay": 0.01, "retry_max_delay": 0.02}
    ).model
