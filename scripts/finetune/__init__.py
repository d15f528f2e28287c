"""llm-finetuning: GRPO / RLVR with a reward-inspection gate.

One module per pipeline stage; every stage reads and writes files in a run directory
(see :mod:`finetune.rundir`), so each can be run, re-run and tested alone.
"""

__version__ = "0.1.0"
