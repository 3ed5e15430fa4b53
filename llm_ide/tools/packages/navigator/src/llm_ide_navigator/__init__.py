"""Code navigation (definition, references, workspace symbols) with jedi, printed as `path:line: text`."""

__version__ = "0.1.0"
