"""`finetune diagnose`: read a GRPO run's training logs, name its symptoms, recommend at most one change.

The modules, in import order (each imports only those before it):

- ``trackiodb``: a Trackio project's local database read as a training log.
- ``logs``: any TRL log of a run as one series per metric; reward roles read off plain TRL reward names.
- ``context``: the run around the logs (spec, the GRPOConfig it trained with, reward roles, model).
- ``evidence``: the run a detector reads, the trend statistics, and the ``Finding`` it returns.
- ``changes``: what a recommended change is, and the variant switch several symptoms share.
- ``detectors``: the registry: one ``Detector`` per symptom, owning its check and its change.
- ``recommend``: the one change (highest priority), held back when learning cannot be told from a hack.
- ``report``: the terminal lines, report.md and curves.png.
- ``licence``: whether a diagnosis licenses a change: this run's own training log bound to its config, or the
  person's signed approval.
- ``diagnosis``: the whole diagnosis (diagnosis.json) and writing it.
- ``apply``: ``--apply``: the recommended variant set in the spec, config/ re-rendered.
- ``reference``: references/diagnosis.md.
"""
