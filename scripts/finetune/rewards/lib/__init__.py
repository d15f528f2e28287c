"""The reward library's Python: real modules the renderer copies VERBATIM beside rewards.py as
``rewards_<what>.py`` helpers (the gate binds each by sha256). Stdlib-only unless a reward kind's
registry entry declares packages; a helper imports a sibling helper by plain name."""
