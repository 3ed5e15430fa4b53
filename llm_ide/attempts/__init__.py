"""Attempts at one task (issue 11): an outer LangGraph graph whose `attempt` node runs the agent graph in a fresh
environment, a reviewer scoring each attempt, and a chooser picking the patch."""
