"""Reward functions: Jinja templates are the single source; render.py writes rewards.py and the doc."""
