"""One CooperBench pair, end to end (`run_pair`: the pair graph of llm_ide/coop/pair.py over the phases of
llm_ide/coop/phases.py)."""

from llm_ide.coop.pair import run_pair
from llm_ide.coop.record import CoopRun, Setting

__all__ = ["CoopRun", "Setting", "run_pair"]
