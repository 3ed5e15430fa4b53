"""Action sampling at `act` (k candidates, one chosen) and demonstrations in the prompt (issue 11, items 4 and 5)."""
