"""A persistent pdb session driven command by command (standard library only, Python >= 3.6)."""

__version__ = "0.1.0"
