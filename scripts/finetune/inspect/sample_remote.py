"""``finetune inspect sample SPEC --emit-requests``: sampling where the GPU is.

For a user whose GPU machine is not the one Claude Code runs on: write the exact requests
``inspect sample`` would generate from - the same prompt rows (same seeds), each prompt as TRL will
see it (``prompt``) and as the model will see it (``prompt_text``: the chat template applied, and
``prompt_token_ids``: tokenized and left-truncated to ``generation.max_prompt_length`` exactly as the
local sampler does) - and a standalone sampling script (vLLM offline, or a ``trl vllm-serve`` /
``vllm serve`` endpoint) whose output ``--import`` / ``--import-base`` take back unchanged.

Written into ``RUN/requests/``: ``requests.jsonl``, ``base_requests.jsonl``, ``sample_vllm.py``,
``README.md``. Only the tokenizer is loaded here (no model weights, no GPU).

Request line: ``ids`` (the sample ids, one per completion), ``row``, ``prompt``, ``conversational``,
``columns``, ``prompt_text``, ``prompt_token_ids``, ``sampling`` (``n``, ``temperature``, ``top_p``,
``top_k``, ``min_p``, ``repetition_penalty``, ``max_tokens``, ``seed``, ``max_model_len``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from finetune import commit, jsonio
from finetune.errors import UserError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from finetune.spec import RunSpec

REQUESTS_DIR = "requests"
REQUESTS = "requests.jsonl"
BASE_REQUESTS = "base_requests.jsonl"
SCRIPT = "sample_vllm.py"

# `finetune inspect sample --help` shows this, and the reward reference quotes it (reference_section).
SAMPLE_FORMATS = """Generate completions the way training will (transformers, or vLLM with a GPU), or import them.

Import format (--import / --import-base): JSONL, one completion per line:
  {"prompt": str or [{"role", "content"}, ...], "completion": str, "id"?: str, "row"?: prompt key,
   "columns"?: {...}, "conversational"?: bool, "completion_tokens"?: int, "truncated"?: bool}
  "prompt" may instead sit under the spec's dataset.prompt_column; any other top-level key is a
  dataset column passed to the rewards (e.g. the gold answer).
  A multi-turn rollout of a spec environment imports whole: "completion" is then TRL's message list,
  [{"role": "assistant", "content", "tool_calls": [{"type": "function", "function": {"name",
  "arguments"}}]}, {"role": "tool", "name", "content"}, ..., {"role": "assistant", "content"}]
  (what `inspect sample --backend transformers` writes); the rewards replay its calls.

--emit-requests (sampling where the GPU is): writes RUN/requests/requests.jsonl and
base_requests.jsonl (one line per prompt: ids, row, prompt, conversational, columns, prompt_text =
the chat template applied, prompt_token_ids = truncated as training does, sampling = n, temperature,
top_p, top_k, min_p, repetition_penalty, max_tokens, seed), sample_vllm.py (vLLM offline, or a
`trl vllm-serve` / `vllm serve` URL) and README.md. The script's output is the import format above.
With a spec environment each request also carries "tools" (the tools' JSON schemas, rendered into
prompt_text as training renders them); sample_vllm.py has no tool loop and refuses such requests:
generate the rollouts with `--backend transformers` where the GPU is and import them.
"""


NO_TOKENIZER_FIX = ("the requests need the policy's tokenizer and chat template here: a local model folder (weights "
                    "not needed) or a hub id in the local cache; or sample on the GPU machine with your own script "
                    "and bring the completions back with `finetune inspect sample SPEC --import FILE` (format: "
                    "`finetune inspect sample --help`)")


def _hub_reachable(model: str) -> str | None:
    """None when the hub answers for ``model``; else why not, in one line. One request, a short timeout, no
    retries: huggingface_hub's downloads retry an unreachable host for close to a minute before failing."""
    from huggingface_hub import model_info

    try:
        model_info(model, timeout=5)
    except Exception as exc:  # any failure to get an answer: the refusal names it
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return None


def _tokenizer(spec: RunSpec) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    from finetune import hub

    model = spec.resolve_path(spec.model)
    local = model.exists()
    source = str(model) if local else spec.model
    try:
        tok: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(source, local_files_only=True,
                                                                     cache_dir=None if local else hub.hub_cache_dir())
    except (OSError, ValueError) as exc:
        if local or not hub.is_repo_id(spec.model):
            raise UserError(f"cannot load the model's tokenizer: {str(exc).splitlines()[0]}", where="model",
                            fix=NO_TOKENIZER_FIX) from None
        why = "HF_HUB_OFFLINE is set" if hub.offline() else _hub_reachable(spec.model)
        if why is not None:
            raise UserError(f"model '{spec.model}': no tokenizer in the Hugging Face cache ({hub.hub_cache_dir()}) "
                            f"and it cannot be downloaded ({why})", where="model", fix=NO_TOKENIZER_FIX) from None
        try:
            tok = AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError) as exc2:
            raise UserError(f"cannot load the model's tokenizer: {str(exc2).splitlines()[0]}", where="model",
                            fix=NO_TOKENIZER_FIX) from None
    tok.truncation_side = "left"  # as the local sampler: keep the end of an over-long prompt
    return tok


def _prompt_text(tok: PreTrainedTokenizerBase, req: dict[str, Any], tools: Tools | None = None) -> str:
    if not req["conversational"]:
        prompt: str = req["prompt"]
        return prompt
    if not getattr(tok, "chat_template", None):
        raise UserError("conversational prompts but the tokenizer has no chat template", where="model",
                        fix="use a model with a chat template, or plain-string prompts")
    if tools is None:
        return cast(str, tok.apply_chat_template(req["prompt"], tokenize=False, add_generation_prompt=True))
    return cast(str, tok.apply_chat_template(_reset_prompt(tools, req), tools=list(tools.schemas), tokenize=False,
                                             add_generation_prompt=True))


class Tools:
    """A spec environment's tools as the rollout starts them (inspect.rollout.RolloutSampler._start): the prompt
    carries their JSON schemas, and a string ``reset()`` returns is appended to the last prompt message."""

    def __init__(self, factory: Any, tools_of: Any) -> None:
        from finetune.inspect.rollout import tool_schemas

        self.factory = factory
        self.schemas: list[dict[Any, Any] | Callable[..., Any]] = list(tool_schemas(tools_of(factory())))


def _reset_prompt(tools: Tools, req: dict[str, Any]) -> list[dict[str, Any]]:
    prompt: list[dict[str, Any]] = req["prompt"]
    observation = tools.factory().reset(**{**req["columns"], "prompt": prompt})
    if isinstance(observation, str):
        prompt = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + observation}]
    return prompt


def _environment_tools(spec: RunSpec, run_dir: Path) -> Tools | None:
    """The run's rendered environment (rewards.py, as the gate binds it), None without one."""
    if spec.environment is None:
        return None
    from finetune import rundir
    from finetune.inspect.rewardmod import load_rewards

    module = load_rewards(run_dir).module
    if not hasattr(module, "environment_factory"):
        raise UserError(f"{rundir.REWARDS} has no environment", where=str(run_dir / rundir.REWARDS),
                        fix="re-render it with `finetune rewards render SPEC` (the spec names an environment)")
    return Tools(module.environment_factory, module.environment_tools)


def _lines(spec: RunSpec, tok: PreTrainedTokenizerBase, reqs: list[dict[str, Any]], k: int,
           temperature: float, tools: Tools | None = None) -> list[dict[str, Any]]:
    g = spec.generation
    sampling = {"n": k, "temperature": temperature, "top_p": g.top_p, "top_k": g.top_k, "min_p": g.min_p or 0.0,
                "repetition_penalty": g.repetition_penalty, "max_tokens": g.max_completion_length,
                "seed": spec.training.seed, "max_model_len": g.max_prompt_length + g.max_completion_length}
    out = []
    for req in reqs:
        text = _prompt_text(tok, req, tools)
        ids = tok(text, add_special_tokens=False, truncation=True, max_length=g.max_prompt_length)["input_ids"]
        out.append({"ids": req["ids"], "row": req["row"], "prompt": req["prompt"],
                    "conversational": req["conversational"], "columns": req["columns"],
                    "prompt_text": text, "prompt_token_ids": list(ids), "sampling": sampling,
                    **({"tools": tools.schemas} if tools is not None else {})})
    return out


def readme(import_command: str) -> str:
    return f"""# Sampling on your GPU machine

Written by `finetune inspect sample --emit-requests`. Copy this folder to the machine with the GPU and
the policy, then run ONE of:

```bash
pip install vllm   # if it is not installed there
python sample_vllm.py requests.jsonl -o samples.jsonl --model /path/to/the/policy
python sample_vllm.py base_requests.jsonl -o base_samples.jsonl --model /path/to/the/policy
```

or, with a server already up (`trl vllm-serve --model /path/to/the/policy`, or `vllm serve ...`):

```bash
python sample_vllm.py requests.jsonl -o samples.jsonl --server http://localhost:8000
python sample_vllm.py base_requests.jsonl -o base_samples.jsonl --server http://localhost:8000
```

Copy `samples.jsonl` and `base_samples.jsonl` back next to this README and import them unchanged:

```bash
{import_command}
```

Each request holds the prompt as TRL passes it to the rewards (`prompt`), as the model reads it
(`prompt_text`, the chat template applied) and its token ids (`prompt_token_ids`, truncated like
training), with the spec's sampling settings (`sampling`). Use the same policy the spec names.
"""


def emit_requests(spec: RunSpec, run_dir: str | Path, *, spec_path: str = "spec.yaml",
                  base: bool = True) -> dict[str, Any]:
    """Write RUN/requests/ (requests, base requests, the sampling script, a README); return a summary."""
    from finetune.dataset import load_rows
    from finetune.inspect.sample import _pick, _requests, held_back_rows
    from finetune.invocation import command

    run_dir = Path(run_dir)
    insp, seed = spec.inspection, spec.training.seed
    rows = load_rows(spec)
    tok = _tokenizer(spec)
    reading = _pick(len(rows), insp.prompts, seed)
    # the held-back prompts travel too; the import holds back a seeded share of the prompts it receives
    reqs = _requests(spec, rows, reading + held_back_rows(len(rows), reading, insp.held_back_prompts, seed)
                     if insp.held_back_prompts else reading, insp.per_prompt, "p")
    b = insp.base_success
    base_reqs = _requests(spec, rows, _pick(len(rows), b.prompts, seed + 1), b.samples_per_prompt, "b") if base else []
    tools = _environment_tools(spec, run_dir)
    main = _lines(spec, tok, reqs, insp.per_prompt, spec.generation.temperature, tools)
    base_lines = _lines(spec, tok, base_reqs, b.samples_per_prompt, b.temperature, tools)
    out = run_dir / REQUESTS_DIR
    script = (resources.files("finetune.inspect") / "templates" / SCRIPT).read_text(encoding="utf-8")
    # requests/ switches whole; what an earlier emit wrote and this one does not (base_requests.jsonl after
    # --no-base) goes, what the user copied back (samples.jsonl from the GPU machine) stays
    emitted = {REQUESTS, BASE_REQUESTS, SCRIPT, "README.md"}
    with commit.staged_dir(out, keep=lambda name: name not in emitted) as tmp:
        jsonio.write_jsonl(tmp / REQUESTS, main)
        if base_lines:
            jsonio.write_jsonl(tmp / BASE_REQUESTS, base_lines)
        (tmp / SCRIPT).write_text(script, encoding="utf-8")
        (tmp / SCRIPT).chmod(0o755)
        back = command("inspect", "sample", spec_path, "--import", out / "samples.jsonl",
                       *(["--import-base", out / "base_samples.jsonl", "--base-temperature", f"{b.temperature:g}"]
                         if base_lines else []))
        (tmp / "README.md").write_text(readme(back), encoding="utf-8")
    return {"dir": out, "import_command": back, "prompts": len(main), "samples": sum(len(r["ids"]) for r in main),
            "base_prompts": len(base_lines), "base_samples": sum(len(r["ids"]) for r in base_lines)}


def reference_section() -> str:
    """The import / --emit-requests formats for references/reward-functions.md (from the CLI's own help)."""
    return ("## Samples: the import format and sampling on another machine\n\n"
            "The samples every reward above is inspected on come from `finetune inspect sample`: generated here, "
            "or produced on the machine with the GPU and imported. This is `finetune inspect sample --help`:\n\n"
            f"```text\n{SAMPLE_FORMATS.strip()}\n```\n\n"
            "The emitted `sample_vllm.py` needs only the standard library and vLLM (or a running server). Its "
            "output rows carry `id`, `row`, `prompt`, `completion`, `conversational`, `columns`, `truncated`, "
            "`completion_tokens` and `source: vllm`, so `--import` takes them back unchanged and the ids match "
            "the ones sampling here would have given.\n")
