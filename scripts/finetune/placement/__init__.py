"""Where the GPUs go: the one place a run's layout is decided.

:func:`decide` returns the whole :class:`Layout` from the hardware, the model's shapes and the method: which GPUs
generate, vLLM colocate or `trl vllm-serve`, the server's TP × DP, the training nodes and processes, the DeepSpeed ZeRO
stage, and the GPU ordinals each launch branch pins. Memory (``finetune.memory``), config render, the launch
templates and ``finetune memory`` read its result; none of them computes a part of it
(tests/test_structure.py holds every other module to that).

- :mod:`.layout` — :class:`Layout`, :class:`Request` (what a spec or the CLI pins) and :func:`arrange` (the layout a
  request names, checked against vLLM's and TRL's rules);
- :mod:`.decide` — :func:`decide`: every layout a request allows, in preference order, sized by the caller's
  ``size`` (the memory model: every moment of start-up and the step), the first that fits.

Placement imports nothing of ``finetune.memory``: it asks the memory model through the ``size`` callback, so the
two never form an import circle.
"""

from finetune.placement.decide import Decision, Sized, decide, generation_gpu_alternatives
from finetune.placement.layout import Layout, LayoutRefusal, Request, arrange, cpu_layout

__all__ = ["Decision", "Layout", "LayoutRefusal", "Request", "Sized", "arrange", "cpu_layout", "decide",
           "generation_gpu_alternatives"]
