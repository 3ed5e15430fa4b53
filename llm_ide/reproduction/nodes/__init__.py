"""The reproduction variant's graph nodes, one per module."""
