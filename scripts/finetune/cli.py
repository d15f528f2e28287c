"""`finetune <group> <verb> ...` — one subcommand group per pipeline stage.

Exit codes (DESIGN.md contract 1): 0 ok, 1 a check failed, 2 bad input (one line, nothing written).

Groups are imported lazily: `finetune lint` must not pay for importing torch/TRL. Each group module
exposes ``add_arguments(parser)`` (which may add its own verbs as sub-parsers) and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from finetune import __version__
from finetune.errors import CheckFailed, UserError

# group -> (module, one-line help). Order is the pipeline order.
GROUPS: dict[str, tuple[str, str]] = {
    "route": ("finetune.route", "Phase 0: decide the fine-tuning method for a task"),
    "rewards": ("finetune.rewards.cli", "render rewards.py from the run spec"),
    "inspect": ("finetune.inspect.cli", "Phase 1: sample, score, review, record verdicts, gate"),
    "data": ("finetune.datafilter", "keep the prompts GRPO can learn from (per-prompt pass rate, gated rewards)"),
    "config": ("finetune.config", "Phase 2: render the validated GRPO config and launch files"),
    "env": ("finetune.env.cli", "check this machine can run a rendered config (launch.sh runs it first)"),
    "memory": ("finetune.memory", "estimate GPU memory for a run spec or a model"),
    "diagnose": ("finetune.diagnose", "Phase 4: read training logs, detect symptoms, pick a variant"),
    "status": ("finetune.status", "where a run directory stands: the phase /finetune resumes at"),
    "lint": ("finetune.lint", "lint skills, commands, agents and references"),
    "demo": ("finetune.demo", "run every phase on the embedded toy task on CPU"),
    "docs": ("finetune.docs", "regenerate (or --check) the generated reference docs"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's usage errors are bad input too: exit 2, one line
        raise UserError(message, where=self.prog, fix=f"see `{self.prog} --help`")


def build_parser(group: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="finetune", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"llm-finetuning {__version__}")
    sub = parser.add_subparsers(dest="group", metavar="<group>", parser_class=_Parser)
    for name, (module, help_) in GROUPS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == group:
            importlib.import_module(module).add_arguments(p)
    return parser


_OS_ERRORS = {  # errno → (what happened, how to fix it)
    errno.EACCES: ("permission denied", "check the permissions of the file or its folder"),
    errno.EPERM: ("operation not permitted", "check the permissions of the file or its folder"),
    errno.EROFS: ("read-only file system", "write the run directory somewhere writable (-o DIR)"),
    errno.EISDIR: ("is a directory, not a file", "name the file itself"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory", "check the path"),
    errno.EEXIST: ("already exists", "choose another name, or remove it first"),
    errno.ENOENT: ("no such file or directory", "check the path"),
    errno.ENOSPC: ("no space left on the device", "free some disk space and run the command again"),
    errno.EDQUOT: ("disk quota exceeded", "free some space and run the command again"),
    errno.ENAMETOOLONG: ("file name too long", "use a shorter path"),
    errno.ELOOP: ("too many levels of symbolic links", "check the symlinks in the path"),
}


def environment_error(exc: BaseException) -> UserError:
    """One line for an OSError / decode error / closed stdin that no stage turned into a UserError."""
    if isinstance(exc, EOFError):
        return UserError("standard input closed before the command finished reading it", where="stdin",
                         fix="run it in a terminal, or use the md/html review and `inspect verdict --file`")
    if isinstance(exc, UnicodeDecodeError):
        return UserError(f"a file is not UTF-8 text ({exc.reason} at byte {exc.start})", fix="save the file as UTF-8")
    if isinstance(exc, UnicodeError):
        return UserError(f"text that cannot be written as UTF-8 ({getattr(exc, 'reason', exc)})",
                         fix="remove unpaired surrogates / undecodable characters from the input")
    what, fix = _OS_ERRORS.get(getattr(exc, "errno", None) or -1, (exc.strerror or str(exc) or "I/O error",
                                                                   "check the path and the disk"))
    paths = [str(p) for p in (getattr(exc, "filename", None), getattr(exc, "filename2", None)) if p]
    return UserError(what, where=" → ".join(paths) or None, fix=fix)


def _broken_pipe() -> int:
    # `finetune memory spec.yaml | head`: the reader left; files were already written atomically.
    # Point stdout at devnull so the interpreter's own flush at exit does not raise again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    group = next((a for a in argv if not a.startswith("-")), None)
    try:
        if group not in GROUPS:
            if group is not None:
                raise UserError(f"unknown command group '{group}'", where="finetune",
                                fix="one of: " + ", ".join(GROUPS))
            parser = build_parser()
            parser.parse_args(argv)
            parser.print_help()
            return 0
        args = build_parser(group).parse_args(argv)
        return int(importlib.import_module(GROUPS[group][0]).run(args) or 0)
    except UserError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return 2
    except (OSError, UnicodeError, EOFError) as exc:
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        # The one guard: the file system and the terminal are inputs too. Every verb gets one line and exit 2
        # (writes are atomic, so nothing half-written is left), never a traceback.
        print(f"error: {environment_error(exc).line()}", file=sys.stderr)
        return 2
    except CheckFailed as exc:
        if str(exc):
            print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
