"""`finetune <group> <verb> ...` — one subcommand group per pipeline stage.

Exit codes (DESIGN.md's exit-code contract): 0 ok, 1 a check failed, 2 bad input (one line, nothing written).

Every command group is one module of this package (``finetune.cli.<group>``): its argparse and the call
into the domain module that does the work; domain modules never import argparse (tests/cli/test_cli_layout.py).
Groups are imported lazily: `finetune lint` must not pay for importing torch/TRL.

The commands are one table: :data:`GROUPS` (group → module, help), and in each group's module its ``VERBS``
(verb → :class:`Verb`: the module's functions that add the verb's arguments and run it), read by :func:`verbs`.
A group without verbs exposes ``add_arguments(parser)`` and ``run(args) -> int``. Dispatch, ``--help``, the docs'
command table, lint's check of `finetune ...` lines and the hostile-input tests (tests/hostile) all read this
table: a verb added to its group's ``VERBS`` is parsed, documented and attacked without another list to update.
Docs and lint read the commands through :func:`shape` (plain data), never through argparse.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from finetune import __version__
from finetune.errors import CheckFailed, UserError

# group -> (module, one-line help). Order is the pipeline order.
GROUPS: dict[str, tuple[str, str]] = {
    "route": ("finetune.cli.route", "Phase 0: decide the fine-tuning method for a task"),
    "rewards": ("finetune.cli.rewards", "render rewards.py from the run spec"),
    "inspect": ("finetune.cli.inspect", "Phase 1: sample, score, review, record verdicts, gate"),
    "data": ("finetune.cli.data", "keep the prompts GRPO can learn from (per-prompt pass rate, gated rewards)"),
    "config": ("finetune.cli.config", "Phase 2: render the validated GRPO config and launch files"),
    "env": ("finetune.cli.env", "check this machine can run a rendered config (launch.sh runs it first)"),
    "memory": ("finetune.cli.memory", "estimate GPU memory for a run spec or a model"),
    "diagnose": ("finetune.cli.diagnose", "Phase 4: read training logs, detect symptoms, pick a variant"),
    "eval": ("finetune.cli.eval", "held-out success before (base) and after training, with a paired interval"),
    "publish": ("finetune.cli.publish", "the person's command: push a model whose card carries its gate's provenance"),
    "status": ("finetune.cli.status", "where a run directory stands: the phase /finetune resumes at"),
    "lint": ("finetune.cli.lint", "lint skills, commands, agents and references"),
    "demo": ("finetune.cli.demo", "run every phase on the embedded toy tasks on CPU (digits, then tool calls)"),
    "docs": ("finetune.cli.docs", "regenerate (or --check) the generated reference docs"),
}


@dataclass(frozen=True)
class Verb:
    """One `finetune <group> <verb>`: ``arguments(parser)`` adds its options to the verb's parser, ``run(args)``
    calls the domain function and prints (exit code). Both are functions of the group's module, whose ``VERBS``
    (verb → Verb, in the order `--help` lists them) sits beside them: a verb is one entry in one file."""

    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    help: str


def verbs(group: str) -> dict[str, Verb]:
    """The verbs of ``group`` (its module's ``VERBS``); empty for a group that takes none (it has
    ``add_arguments``/``run``). Imports the group's module: the group modules import their domain lazily."""
    table: dict[str, Verb] = vars(importlib.import_module(GROUPS[group][0])).get("VERBS", {})
    return table


def commands() -> list[tuple[str, ...]]:
    """Every command as argv words: ``("inspect", "score")``, ``("route",)`` — what the hostile suite covers."""
    out: list[tuple[str, ...]] = []
    for group in GROUPS:
        out += [(group, verb) for verb in verbs(group)] or [(group,)]
    return out


def _add_group_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    table = verbs(name)
    if not table:
        importlib.import_module(GROUPS[name][0]).add_arguments(parser)
        return
    sub = parser.add_subparsers(dest="verb", metavar="<verb>", required=True, parser_class=_Parser)
    for verb, entry in table.items():
        entry.arguments(sub.add_parser(verb, help=entry.help, description=entry.help))


def _handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    table = verbs(args.group)
    run: Callable[[argparse.Namespace], int] = (table[args.verb].run if table
                                                 else importlib.import_module(GROUPS[args.group][0]).run)
    return run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's usage errors are bad input too: exit 2, one line
        raise UserError(message, where=self.prog, fix=f"see `{self.prog} --help`")


def build_parser(group: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="finetune", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"llm-finetuning {__version__}")
    sub = parser.add_subparsers(dest="group", metavar="<group>", parser_class=_Parser)
    for name, (_, help_) in GROUPS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == group:
            _add_group_arguments(name, p)
    return parser


@dataclass(frozen=True)
class Shape:
    """What one command accepts, read from its own parser: the docs' command table and lint's check of
    the `finetune ...` lines in the docs read this, so they never reach into argparse themselves."""

    help: str
    options: frozenset[str]  # every option string, e.g. "-o", "--out", "-h"
    verbs: dict[str, Shape] = field(default_factory=dict)  # in the order the group defines them


def _sub_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _shape(parser: argparse.ArgumentParser, help_: str) -> Shape:
    sub = _sub_action(parser)
    verbs: dict[str, Shape] = {}
    if sub is not None:
        helps = {c.dest: c.help or "" for c in sub._choices_actions}
        verbs = {name: _shape(p, helps.get(name, "")) for name, p in sub.choices.items()}
    return Shape(help_, frozenset(parser._option_string_actions), verbs)


def shape(group: str, *, load: bool = True) -> Shape:
    """The command group as its module defines it (its verbs, their options and help). ``load=False``:
    only what `finetune --help` shows, without importing the group's module. Unknown group → KeyError;
    a module that does not import raises what its import raises."""
    help_ = GROUPS[group][1]
    parser = build_parser(group if load else None)
    sub = _sub_action(parser)
    assert sub is not None  # build_parser always adds the groups
    return _shape(sub.choices[group], help_)


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
    unknown = (getattr(exc, "strerror", None) or str(exc) or "I/O error", "check the path and the disk")
    what, fix = _OS_ERRORS.get(getattr(exc, "errno", None) or -1, unknown)
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
        return int(_handler(args)(args) or 0)
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
    except Exception as exc:
        if not getattr(exc, "agent_code_refused", False):
            raise
        # agent-written code (a verifier, an environment) the sandbox cannot run here: refused, never run outside it
        print(f"error: {UserError(str(exc), fix=str(getattr(exc, 'fix', ''))).line()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
