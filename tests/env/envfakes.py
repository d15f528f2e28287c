"""Fakes for the environment tests: a real interpreter whose view of the machine is changed from outside.

* ``sitecustomize.py`` (on PYTHONPATH) hides the top-level modules named in ``FAKE_MISSING`` behind the
  meta-path finders (find_spec gives None and an import raises ModuleNotFoundError, as on a machine
  without them) and,
  with ``FAKE_GPUS=N`` / ``FAKE_GPU_GIB``, makes torch report N CUDA GPUs of that memory (compute capability
  ``FAKE_GPU_CC``, a CUDA ``FAKE_CUDA`` build carrying ``FAKE_TORCH_ARCHS``; an H100 by default), and with
  ``FAKE_CPUS=N`` makes ``os.cpu_count()`` / ``os.sched_getaffinity()`` report N logical CPUs;
* fake packages (``vllm``, ``deepspeed``, another ``trl``) that only carry a version;
* a wrapper ``python`` in a folder of its own, for FINETUNE_PYTHON (launch.sh runs trl / accelerate
  from the same folder), that records every invocation.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

SITECUSTOMIZE = textwrap.dedent('''
    import os
    import sys

    _BLOCK = set(filter(None, os.environ.get("FAKE_MISSING", "").split(",")))


    class _Hide:
        """Wraps a meta-path finder: a blocked module is not found (find_spec None), as when absent."""

        def __init__(self, finder):
            self._finder = finder

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in _BLOCK:
                return None
            find = getattr(self._finder, "find_spec", None)
            return find(name, path, target) if find else None

        def __getattr__(self, attr):
            return getattr(self._finder, attr)


    if _BLOCK:
        sys.meta_path[:] = [_Hide(f) for f in sys.meta_path]

    if os.environ.get("FAKE_CPUS"):  # a host with that many logical CPUs (all in this process's CPU set)
        _cpus = int(os.environ["FAKE_CPUS"])
        os.cpu_count = lambda: _cpus
        os.sched_getaffinity = lambda pid: set(range(_cpus))

    if os.environ.get("FAKE_GPUS"):
        import types

        import torch

        _n, _gib = int(os.environ["FAKE_GPUS"]), float(os.environ.get("FAKE_GPU_GIB", "79.2"))
        torch.cuda.is_available = lambda: _n > 0
        torch.cuda.device_count = lambda: _n
        torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(total_memory=int(_gib * 2**30),
                                                                           name="Fake H100")
        torch.version.cuda = os.environ.get("FAKE_CUDA", "12.8")
        _cc = tuple(int(x) for x in os.environ.get("FAKE_GPU_CC", "9.0").split("."))
        torch.cuda.get_device_capability = lambda i: _cc
        _archs = os.environ.get("FAKE_TORCH_ARCHS", "sm_80,sm_86,sm_90").split(",")
        torch.cuda.get_arch_list = lambda: _archs
''')


def fake_site(root: Path, versions: dict[str, str] | None = None) -> Path:
    """A PYTHONPATH folder with the sitecustomize above and fake packages {name: __version__}."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "sitecustomize.py").write_text(SITECUSTOMIZE)
    for name, version in (versions or {}).items():
        (root / name).mkdir(exist_ok=True)
        (root / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return root


def fake_env_python(folder: Path, site: Path, log: Path, **env: str) -> Path:
    """``folder/python``: records its arguments in ``log``, then runs this interpreter with ``site`` first
    on PYTHONPATH and ``env`` set."""
    folder.mkdir(parents=True, exist_ok=True)
    exports = "".join(f"export {k}={_sh(v)}\n" for k, v in env.items())
    py = folder / "python"
    py.write_text(f"#!/bin/sh\necho \"python $*\" >> {_sh(str(log))}\n{exports}"
                  f"export PYTHONPATH={_sh(str(site))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
                  f"exec {_sh(sys.executable)} \"$@\"\n")
    py.chmod(0o755)
    return py


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _sh(value: str) -> str:
    import shlex

    return shlex.quote(value)


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FINETUNE_PYTHON", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               PATH="/usr/local/bin:/usr/bin:/bin")  # no venv on PATH: launch.sh must not need it
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(extra)
    return env
