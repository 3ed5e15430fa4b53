"""The repository as a run keeps it across faults: the base commit kept out of the agent's reach, its future hidden,
snapshots of the worktree, the patch, the operations that change it recorded before they run (at most once)."""
