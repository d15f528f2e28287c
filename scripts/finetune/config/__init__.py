"""Phase 2: a validated GRPOConfig, train.py and launch files for the target hardware.

:mod:`.build` checks the spec against the installed TRL and builds the plan (:mod:`.plan`'s types; the
dataset's lengths: :mod:`.dataset`; where the run goes: :mod:`.topology`); :mod:`.render` writes ``config/``
atomically from the Jinja templates.
"""
