"""Reproduction first (issue 25): a reproduction script given with the task or written by the agent before its first
step, run on the original code, at any time (`reproduce`) and at submit; for attempts, every patch run against the
reproductions and the repository's tests in a clean environment before any model judges. See docs/reproduction.md."""
