"""Phase 1: the reward-inspection gate.

sample → score (flags, probes, base success) → review → verdicts → gate. Each step reads and writes
files in the run directory (DESIGN.md); :func:`finetune.inspect.gate.verify_gate` tells later stages
whether a PASS still holds.
"""
