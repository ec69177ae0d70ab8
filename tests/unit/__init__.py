"""Pure tests: no root, no process started, no testbed (the coverage tier, under a minute)."""
