"""Static check: every `{{ expr }}` in a code/config/doc template goes through an escaping filter.

The project's templates render spec strings into Python, shell, YAML and Markdown. A value printed
without one of `finetune.literals.ESCAPING_FILTERS` could carry code out of its quotes,
so this walks every template's Jinja AST and fails on any output expression that is neither
escaped, a template constant, a macro call (checked in its own template) nor on the allow-list below
of values computed by code (numbers, hex digests, version strings).
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes

from finetune import literals

PKG = Path(literals.__file__).resolve().parent
TEMPLATE_DIRS = [PKG / "templates", PKG / "rewards" / "templates"]

# Values computed by the plugin, never copied from a spec string: numbers, digests, versions.
CODE_VALUES = {
    "cache",  # a module-global name from the kind registry (Kind.caches), never a spec string
    "version", "trl_version", "partial_ceiling", "margin", "section_digest", "limit", "floor", "vllm_port",
    "zero_stage", "generation_batch_size", "ungated_smoke_steps", "topo.training_processes", "topo.training_nodes", "topo.nodes",
    "topo.gpus_per_node", "topo.processes_per_node", "topo.vllm_gpus", "topo.vllm_tp", "topo.vllm_dp", "digest", "r.max_points", "r.retries",
    # finetune.placement's layout: GPU ordinals, node numbers and machine ranks (integers), a torch dtype name
    "topo.generation_gpu_ids", "topo.training_gpu_ids", "topo.training_ranks", "topo.last_node", "topo.quant_storage",
    "binding_gib",  # "12.3 of 79.6 GiB", formatted by config.render from the estimate
    "r.concurrency", "r.max_tokens", "r.max_bytes", "r.max_depth", "r.memory_mb", "r.overlong_buffer",
    "r.workers", "r.timeout_s", "r.max_penalty", "r.meta.weight", "r.meta.threshold", "r.weight",
    "plan.stats.rows", "kwargs.per_device_train_batch_size.value", "kwargs.steps_per_generation.value",
    "kwargs.num_generations.value", "kwargs.gradient_accumulation_steps.value",
    "kwargs.vllm_max_model_length.value", "kwargs.vllm_server_timeout.value", "s.value",
    "counts.get", "memory_table",
    # gate.json's counts: inspect.gaterecord.Counts, every field an int the model validates
    "counts.read", "counts.human", "counts.agent", "counts.agreed", "counts.disagreements",
    "plan.run_length.to_markdown",  # finetune.runlength: a table of counts computed from the rendered numbers
    # grpo-memory.md.j2: Markdown the estimator renders (Estimate.to_markdown, recommendation_markdown) and the
    # setups of memory.published_checks() — constants in memory/published.py (one quotes '~12 GB'), never a spec string
    "worked_example", "worked_recommendation", "c.setup",
    # reward-functions.md.j2: code the reward templates render (function bodies, libraries, the format gate,
    # helpers, example YAML) and the registry's own Markdown prose (kind docs, notes, reading rules, reasons,
    # field descriptions) — all from the package, never a spec string
    "usage_yaml", "common_library", "kind.doc", "f.meaning", "note", "kind.example_yaml", "kind.function",
    "kind.library", "format_gate", "mathpool", "rule.text", "rule.why", "reason.meaning", "reason.fix",
    "loop.index",
    # demo-report.md.j2: text the demo itself made, already escaped for a table cell by finetune.demo (its
    # stages' names, details and logs, the gate's reasons, Markdown links to its artefacts, held-out examples)
    "stopped.phase", "stopped.status", "stopped.detail", "phase.name", "phase.status", "phase.detail", "phase.log",
    "model.task", "fail_reason", "held_run.link", "held_run.eval", "example.prompt", "example.before", "example.after",
    "artefact_title", "artefact_link",
}
NUMERIC_FILTERS = {"int", "round", "length", "count", "float", "abs"}
MACRO_NAMES = {"library", "reward"}


def _dotted(node: nodes.Node) -> str | None:
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        base = _dotted(node.node)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, (nodes.Slice, nodes.Const)):
        return _dotted(node.node)
    if isinstance(node, nodes.Call):  # counts.get("read", "?") and the like
        return _dotted(node.node)
    return None


def _safe(node: nodes.Node) -> bool:
    if isinstance(node, nodes.Const):
        return True
    if isinstance(node, nodes.Filter):
        if node.name == "join" and isinstance(node.node, nodes.Call) and _dotted(node.node) == "range":
            return True  # GPU indices
        if node.name == "join" and _dotted(node.node) in CODE_VALUES:
            return True  # a list of integers the package computed (GPU ordinals, machine ranks)
        return node.name in literals.ESCAPING_FILTERS or node.name in NUMERIC_FILTERS
    if isinstance(node, nodes.CondExpr):
        return _safe(node.expr1) and (node.expr2 is None or _safe(node.expr2))
    if isinstance(node, nodes.Concat):
        return all(_safe(n) for n in node.nodes)
    if isinstance(node, (nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod)):
        return _safe(node.left) and _safe(node.right)
    if isinstance(node, (nodes.Neg, nodes.Pos)):
        return _safe(node.node)
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) and node.node.attr in MACRO_NAMES:
        return True
    return _dotted(node) in CODE_VALUES


def unescaped(path: Path) -> list[str]:
    env = literals.register(jinja2.Environment())
    tree = env.parse(path.read_text(encoding="utf-8"))
    bad = []
    for output in tree.find_all(nodes.Output):
        for child in output.nodes:
            if isinstance(child, nodes.TemplateData) or _safe(child):
                continue
            bad.append(f"{path.name}:{child.lineno}: {_dotted(child) or type(child).__name__}")
    return bad


TEMPLATES = sorted([p for d in TEMPLATE_DIRS for p in d.glob("*.j2")]
                   + list((PKG / "rewards" / "kinds").glob("*/template.py.j2")))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.relative_to(PKG).as_posix())
def test_every_output_is_escaped(path):
    assert unescaped(path) == []


def test_the_check_catches_a_bare_spec_value(tmp_path):
    t = tmp_path / "t.py.j2"
    t.write_text('x = "{{ r.answer_column }}"\ny = {{ r.answer_column | py }}\n# {{ r.name | py_comment }}\n'
                 '{{ T["math"].reward(r) }} {{ version }} {{ "a" if x else r.model }}\n')
    assert unescaped(t) == ["t.py.j2:1: r.answer_column", "t.py.j2:4: CondExpr"]


def test_every_project_environment_registers_the_filters():
    from finetune.config import render as config_render
    from finetune.inspect import review
    from finetune.rewards import render as rewards_render

    envs = [rewards_render.environment(), config_render._env(), review.environment(), literals.environment(PKG / "templates")]
    for env in envs:
        assert set(literals.FILTERS) <= set(env.filters)
        assert env.undefined is jinja2.StrictUndefined
