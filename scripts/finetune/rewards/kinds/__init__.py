"""The reward kinds, one folder each: ``kinds/<type>/__init__.py`` (the spec model and its ``@kind(...)`` entry),
``template.py.j2`` (the rendered function and its library code) and ``notes.md`` (the failure modes it closes).

Importing this package imports every folder, which registers each kind in :data:`finetune.rewards.kind.KINDS`,
then orders the table by each entry's ``order`` (the render order). Adding a kind is adding a folder: nothing
here lists them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from finetune.rewards.kind import KINDS

for _folder in sorted(p.parent for p in Path(__file__).resolve().parent.glob("*/__init__.py")):
    importlib.import_module(f"{__name__}.{_folder.name}")

_ordered = sorted(KINDS.values(), key=lambda k: k.order)
KINDS.clear()
KINDS.update((k.type, k) for k in _ordered)
