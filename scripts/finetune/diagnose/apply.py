"""`finetune diagnose RUN --apply`: set the recommended variant in the run spec (the original kept beside
it) and re-render config/ through :func:`finetune.config.render.render`."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import yaml

from finetune import atomic
from finetune.config import render as renderer
from finetune.diagnose.context import RunContext
from finetune.errors import CheckFailed, UserError
from finetune.spec import parse_spec
from finetune.yamlio import load_with_lines


def set_variant_text(text: str, variant: str, line: int | None) -> str:
    """The spec text with ``variant:`` set, comments and layout kept (only that one line changes)."""
    lines = text.splitlines(keepends=True)
    if line is not None:
        i = line - 1
        m = re.match(r"^(\s*variant\s*:\s*)([^#\n]*?)(\s*(#.*)?)(\r?\n)?$", lines[i])
        if m is None:
            raise UserError("cannot find the `variant:` value on its line", where=f"line {line}",
                            fix="write it as `variant: grpo` on one line")
        lines[i] = f"{m.group(1)}{variant}{m.group(3) or ''}{m.group(5) or ''}"
        return "".join(lines)
    sep = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{sep}variant: {variant}  # set by `finetune diagnose --apply`\n"


def apply_variant(ctx: RunContext, doc: dict[str, Any], *, no_gate: bool = False) -> dict[str, Any]:
    """Write the spec with the recommended variant (keeping the original) and re-render config/."""
    change = doc["recommended_change"]
    if change is None or change["kind"] != "variant":
        return {"applied": False, "why": "no variant to switch to: " + doc["headline"]}
    if ctx.spec_path is None:
        raise UserError("--apply needs the run spec", where="--spec",
                        fix="pass --spec SPEC (or keep spec.yaml in the run directory)")
    variant = change["variant"]
    spec_path = ctx.spec_path
    original = spec_path.read_bytes()
    data, lines = load_with_lines(spec_path)
    if data.get("variant") == variant:
        return {"applied": False, "why": f"the spec already says variant: {variant}"}
    new_text = set_variant_text(original.decode("utf-8"), variant, lines.get(("variant",)))
    parse_spec(yaml.safe_load(new_text), spec_path)  # the edited spec must still be valid
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    kept = spec_path.with_name(f"{spec_path.stem}.before-{variant}.{stamp}{spec_path.suffix}")
    atomic.write_bytes(kept, original)
    atomic.write_text(spec_path, new_text)
    try:
        # the renderer reads gate.json and this diagnosis from the run directory, wherever the spec lives
        out = None if spec_path.parent.resolve() == ctx.run_dir.resolve() else ctx.run_dir
        _, target = renderer.render(spec_path, out, no_gate=no_gate)
    except (UserError, CheckFailed):
        atomic.write_bytes(spec_path, original)  # the spec and config/ stay consistent with each other
        kept.unlink(missing_ok=True)
        raise
    return {"applied": True, "variant": variant, "spec": str(spec_path), "original_kept": str(kept),
            "config_dir": str(target)}
