"""The training environment: what a rendered config needs (target.py) and whether this machine has it (check.py)."""
