"""Render a run's standalone rewards.py (and its rewards_*.py helpers) from the Jinja templates.

The templates under ``templates/`` are the single source of every reward function: this module
renders them into a run directory, and :mod:`finetune.rewards.reference` renders the same macros into
references/reward-functions.md.

The rendered rewards.py (standalone: it imports only the packages its header declares) exposes one function per
spec reward, named as the spec's ``name`` (TRL logs ``rewards/<name>/mean``), ``REWARD_FUNCS`` (spec order),
``REWARD_META`` (one ``rewards_meta.RewardMeta`` per reward, decided once here by :func:`plan`; Phase 1, the gate,
train.py, ``watch.instrument`` and ``finetune diagnose`` read them and derive none), ``REWARD_WEIGHTS`` and
``disable_caches()`` (the gate's determinism re-score bypasses any judge cache). Its helpers are rendered beside it
as ``rewards_<what>.py`` and loaded by path (``_helper(name)``, never by module search); the gate binds them all
(``hashing.reward_files``). Each call logs ``rewards/<name>/errors`` through TRL's ``log_metric``; answer-reading
rewards log a reason id per row as the completions-table column ``<name>/why`` (``log_extra``; every id declared
by its kind, ``registry.explain``). In a spec with format rewards every correctness reward scores 0 on a
completion that fails one (``gated``): correct+formatted > formatted-wrong > malformed; partial credit is at most
``PARTIAL_CEILING``. A spec's ``environment`` file is copied as ``rewards_env.py`` (AST-checked, gate-bound);
rewards.py then defines ``ENVIRONMENT_CLASS``, ``MAX_TOOL_CALLING_ITERATIONS`` and ``environment_factory()``, whose
stand-in class has the real tools' names, docstrings and signatures (TRL renders the same schemas) and runs each
call in the sandbox's agent host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from finetune import __version__, jsonio, literals, rundir
from finetune.errors import UserError
from finetune.rewards.kind import KINDS, KINDS_DIR, TEMPLATES, PlanContext, PlanError, reading_of
from finetune.rewards.lib import ALWAYS, HELPERS, SHARED_STDLIB
from finetune.rewards.lib.rewards_meta import RewardMeta
from finetune.rewards.registry import TYPE_ORDER
from finetune.rewards.specs import PARTIAL_CEILING, ordering_margin, penalty_floors

if TYPE_CHECKING:
    import jinja2

    from finetune.spec import RunSpec

HELPER_FILES = {name: file for name, (file, _) in HELPERS.items()}


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""

def _macros(template: str) -> Any:
    """A reward template's macros (``library()``, ``reward(...)``): Jinja makes them attributes only at runtime."""
    return environment().get_template(template).module


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The Jinja environment every reward template renders in (strict: an unknown name is an error)."""
    import jinja2

    # the shared templates, and each kind's as "<type>/template.py.j2" (its folder under kinds/)
    loader = jinja2.FileSystemLoader([str(TEMPLATES), str(KINDS_DIR)])
    env = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False)
    literals.register(env)
    env.filters["tuple"] = tuple
    env.filters["judge_host"] = _host  # a judge's host, for the rendered reward to say which host it calls
    env.filters["tojson_compact"] = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))
    env.globals["partial_ceiling"] = PARTIAL_CEILING
    env.globals["version"] = __version__
    return env


@dataclass(frozen=True)
class Rendered:
    """One reward as its template renders it: the spec entry, its RewardMeta and its ``reward`` macro's
    arguments after the entry (the kind's ``macro_args``)."""

    spec: Any
    meta: RewardMeta
    args: tuple[Any, ...]

    @property
    def template(self) -> str:
        return KINDS[self.spec.type].template


def _fail(loc: str, what: str, fix: str, spec_path: Path | None) -> UserError:
    where = str(spec_path) if spec_path else "spec"
    if spec_path is not None and spec_path.is_file():
        from finetune.yamlio import line_for, load_with_lines

        try:
            _, lines = load_with_lines(spec_path)
            parts: list[Any] = []
            for token in loc.replace("]", "").replace("[", ".").split("."):
                parts.append(int(token) if token.isdigit() else token)
            line = line_for(lines, tuple(parts))
            where = f"{spec_path}:{line}" if line else where
        except UserError:
            pass
    return UserError(f"{loc}: {what}", where=where, fix=fix)


def plan(rewards: list[Any], max_completion_length: int, spec_path: Path | None = None) -> list[Rendered]:
    """Check cross-reward settings and decide each reward's :class:`RewardMeta` (role, threshold, range, gating,
    episode: computed here once, written into rewards.py, read back everywhere) and its macro arguments."""
    names = [r.name for r in rewards]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise _fail(f"rewards[{names.index(dup, names.index(dup) + 1)}].name", f"duplicate reward name '{dup}'",
                    "give every reward its own name", spec_path)
    has_format = any(r.effective_role == "format" for r in rewards)
    base = {r.name: RewardMeta(name=r.name, type=r.type, role=r.effective_role, weight=r.weight,
                               threshold=r.pass_threshold, min=r.min_score, max=r.max_score,
                               gated=has_format and r.effective_role == "correctness",
                               episode=reading_of(r).episode) for r in rewards}
    context = PlanContext(rewards, base, penalty_floors(rewards), max_completion_length)
    out = []
    for index, r in enumerate(rewards):
        entry = KINDS[r.type]
        planned: dict[str, Any] = {}
        if entry.plan is not None:
            try:
                planned = entry.plan(r, context)
            except PlanError as exc:
                raise _fail(f"rewards[{index}].{exc.field}", exc.what, exc.fix, spec_path) from None
        meta = replace(base[r.name], **{k: v for k, v in planned.items() if k in _META_FIELDS})
        out.append(Rendered(r, meta, entry.macro_args(r, meta, planned)))
    return out


_META_FIELDS = {f.name for f in fields(RewardMeta)}


def reward_metas(spec: RunSpec) -> list[RewardMeta]:
    """The RewardMeta ``rewards render`` writes for ``spec``'s rewards, in spec order (``finetune diagnose``
    reads them this way when the run has a spec but no rewards.py)."""
    return [item.meta for item in plan(list(spec.rewards), spec.generation.max_completion_length, spec.source)]


def _requirements(rewards: list[Any]) -> tuple[list[str], list[str]]:
    """(pip requirements, helper keys) of the rendered code for ``rewards``: the kinds' entries and the helpers
    every rewards.py loads."""
    packages: list[str] = []
    helpers: list[str] = list(ALWAYS)
    for t in TYPE_ORDER:
        if not any(r.type == t for r in rewards):
            continue
        packages += [p for p in KINDS[t].packages if p not in packages]
        helpers += [h for h in KINDS[t].helpers if h not in helpers]
    return packages, helpers


def render_sources(rewards: list[Any], *, run_name: str = "run", spec_path: str = "spec.yaml",
                   section_digest: str = "", max_completion_length: int = 1024,
                   source_path: Path | None = None, tool_env: Any = None,
                   agent_env: tuple[str, ...] = ()) -> dict[str, str]:
    """File name → text for rewards.py and every helper it needs (nothing is written); ``tool_env``: the
    spec's EnvironmentSpec, whose file is copied as rewards_env.py; ``agent_env``: the environment variables the
    person allows agent-written code (a verifier, the environment) to read in the sandbox (none by default)."""
    planned = plan(rewards, max_completion_length, source_path)
    types_used = [t for t in TYPE_ORDER if any(r.type == t for r in rewards)]
    packages, helpers = _requirements(rewards)
    env_text = _environment_file(tool_env, source_path) if tool_env is not None else None
    if tool_env is not None and "toolcall" not in helpers:
        helpers.append("toolcall")  # the replay reads the completion's calls
    user_files = _user_files(rewards, source_path)
    env_modules = _environment_modules(tool_env, env_text, source_path) if env_text is not None else {}
    _add_modules(user_files, env_modules, "environment.file", source_path)
    if env_text is not None:
        user_files[ENV_FILE] = env_text
    elif any(KINDS[r.type].needs_environment for r in rewards):
        raise _fail("rewards", "a `type: environment` reward needs the spec's `environment: {file, class}`",
                    "add the environment section", source_path)
    # agent-written code (a verifier, the environment, their modules) runs in the sandbox's agent host: the runner
    # is rendered beside it; an environment whose tools run code also needs the trusted side's tool pool
    env_sandbox = any(uses_sandbox(text) for text in ([env_text] if env_text else []) + list(env_modules.values()))
    if user_files and "sandbox" not in helpers:
        helpers.append("sandbox")
    stdlib = sorted(set(SHARED_STDLIB).union(*(KINDS[t].stdlib for t in types_used)))
    third_party = [m for t in types_used for m in KINDS[t].imports]
    helper_files = [HELPER_FILES[h] for h in helpers]
    helper_files += list(user_files)
    env = environment()
    # Kinds whose library macro renders nothing (their code lives in helpers) add no section.
    library_templates = [KINDS[t].template for t in types_used
                         if str(_macros(KINDS[t].template).library()).strip()]
    text = env.get_template("rewards.py.j2").render(
        run_name=run_name, spec_path=spec_path, section_digest=section_digest or "-" * 16, rewards=planned,
        packages=packages, helper_files=helper_files,
        helper_modules=[f[:-3] for f in helper_files if f not in user_files],
        agent_files=tuple(user_files), agent_env=tuple(agent_env),
        stdlib_imports=stdlib, package_imports=third_party,
        library_templates=library_templates, environment=tool_env, env_sandbox=env_sandbox,
        caches=[c for t in types_used for c in KINDS[t].caches],
        gated=any(p.meta.role == "format" for p in planned), margin=ordering_margin(rewards) or 0.0)
    files = {rundir.REWARDS: text}
    for helper in helpers:
        files[HELPER_FILES[helper]] = _render_helper(helper)
    files.update(user_files)
    for name, source in files.items():
        compile(source, name, "exec")  # a template bug must fail here, not on the training box
    return files


ENV_FILE = "rewards_env.py"
SANDBOX_MODULE = "rewards_sandbox"  # the name a code-running tool imports the sandbox by (its rendered copy)


def uses_sandbox(source: str) -> bool:
    """Whether a copied user file (the environment, a `type: python` verifier, one of their own modules)
    imports the sandbox (``from rewards_sandbox import run_python``): then the runner is copied beside it as
    rewards_sandbox.py, bound by the gate like every rewards_*.py."""
    import ast

    return SANDBOX_MODULE in _imported_names(ast.parse(source))


def _inside_spec_folder(name: str, loc: str, source_path: Path | None) -> Path:
    """The resolved path of a user file the spec names, refused when it lies outside the spec's folder (an
    absolute path, a ``..`` escape, a symlink pointing out): the run folder must show everything the gate
    binds, and a spec must not copy files from elsewhere on the machine into a training run."""
    base = (source_path.parent if source_path is not None else Path.cwd()).resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base):
        raise _fail(loc, f"{name} resolves to {path}, outside the spec's folder {base}",
                    f"copy the file into {base} and name it relative to the spec", source_path)
    return path


def _environment_file(environment: Any, source_path: Path | None) -> str:
    """The text of the spec's environment file, copied verbatim (the gate binds it like every rewards_*.py).
    A missing file, a syntax error, a missing class or a class without ``reset`` is refused."""
    import ast

    path = _inside_spec_folder(environment.file, "environment.file", source_path)
    if not path.is_file():
        raise _fail("environment.file", f"no file {path}", "name your environment's .py file (relative to the "
                    "spec's folder)", source_path)
    text: str = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as exc:
        raise _fail("environment.file", f"{path}:{exc.lineno}: {exc.msg}", "fix the syntax error",
                    source_path) from None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    cls = classes.get(environment.class_)
    if cls is None:
        raise _fail("environment.class", f"{path} defines no class '{environment.class_}' (it defines: "
                    f"{', '.join(sorted(classes)) or 'none'})", "name a top-level class of that file", source_path)
    methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "reset" not in methods and not cls.bases:
        raise _fail("environment.class", f"class {environment.class_} has no reset() method",
                    "define reset(self, **row) (TRL calls it at the start of every rollout)", source_path)
    if not {m for m in methods if not m.startswith("_") and m not in ("reset", "get_reward")} and not cls.bases:
        raise _fail("environment.class", f"class {environment.class_} has no public method (no tool)",
                    "define the tools as public methods with type hints and a docstring", source_path)
    return text


def _environment_modules(environment: Any, text: str, source_path: Path | None) -> dict[str, str]:
    """rewards_lib_<name>.py → text of each module beside the environment file that it imports (transitively),
    as for a verifier: without the copy, env.py's `from env_utils import X` would fail on the training box or
    import whatever module of that name its sys.path holds."""
    import ast

    path = _inside_spec_folder(environment.file, "environment.file", source_path)
    return _local_modules(ast.parse(text, str(path)), path, "environment.file", source_path)


def environment_sources(environment: Any, source_path: Path | None) -> dict[str, str]:
    """The agent-written files of the spec's environment as ``rewards render`` copies them (rewards_env.py and
    its own modules as rewards_lib_NAME.py): what `config render` runs in the sandbox to read its tools."""
    text = _environment_file(environment, source_path)
    return {ENV_FILE: text, **_environment_modules(environment, text, source_path)}


def _add_modules(files: dict[str, str], modules: dict[str, str], loc: str, source_path: Path | None) -> None:
    """Add ``modules`` (rewards_lib_*.py) to ``files``; two different files of one module name (a verifier's and
    the environment's, in different folders) are refused: one `import NAME` cannot mean both."""
    for name, text in modules.items():
        if files.get(name, text) != text:
            raise _fail(loc, f"two different local modules are imported as '{name[len(LIB_PREFIX):-3]}' (the "
                        "environment's and a verifier's)", "rename one of them (and its import)", source_path)
        files[name] = text


def _user_files(rewards: list[Any], source_path: Path | None) -> dict[str, str]:
    """rewards_user_<name>.py → the text of each `type: python` reward's file, copied verbatim (the gate
    binds it like every rewards_*.py). A missing file, a syntax error or a missing function is refused."""
    import ast

    out: dict[str, str] = {}
    for index, r in enumerate(rewards):
        if not KINDS[r.type].copies_verifier:
            continue
        path = _inside_spec_folder(r.file, f"rewards[{index}].file", source_path)
        if not path.is_file():
            raise _fail(f"rewards[{index}].file", f"no file {path}", "name your verifier's .py file (relative to "
                        "the spec's folder)", source_path)
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text, str(path))
        except SyntaxError as exc:
            raise _fail(f"rewards[{index}].file", f"{path}:{exc.lineno}: {exc.msg}", "fix the syntax error",
                        source_path) from None
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if r.function not in defined:
            raise _fail(f"rewards[{index}].function", f"{path} defines no function '{r.function}' (it defines: "
                        f"{', '.join(sorted(defined)) or 'none'})", "name a top-level function of that file",
                        source_path)
        out[f"rewards_user_{r.name}.py"] = text
        _add_modules(out, _local_modules(tree, path, f"rewards[{index}].file", source_path),
                     f"rewards[{index}].file", source_path)
    return out


LIB_PREFIX = "rewards_lib_"  # a verifier's own module NAME.py, copied as rewards_lib_NAME.py and bound like it


def _imported_names(tree: Any) -> set[str]:
    """Top-level names of every absolute import anywhere in ``tree`` (inside functions too)."""
    import ast

    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _local_modules(tree: Any, path: Path, loc: str, source_path: Path | None) -> dict[str, str]:
    """rewards_lib_<name>.py → text of each module beside the verifier that it imports (and that those
    import, transitively), found with ast: without the copy the verifier would import whatever the training
    box's sys.path holds under that name, or die with ModuleNotFoundError. A local package, or a local
    file named like a standard-library / installed module (which one runs depends on sys.path order), is
    refused."""
    import ast
    import sys
    from importlib import metadata

    known = set(sys.stdlib_module_names) | set(metadata.packages_distributions())
    folder, out, todo, seen = path.parent, {}, sorted(_imported_names(tree)), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module, package = folder / f"{name}.py", folder / name
        if (package / "__init__.py").is_file():
            raise _fail(loc, f"{path} imports the local package {name}/, which is not copied beside rewards.py",
                        "make it one module file next to the verifier (or install it as a package)", source_path)
        if not module.is_file():
            continue  # a library: the environment check and the scoring child import it from the environment
        if name in known:
            raise _fail(loc, f"{module} is named like the library '{name}' the verifier may mean instead",
                        "rename the local module (and its import)", source_path)
        text = module.read_text(encoding="utf-8")
        try:
            sub = ast.parse(text, str(module))
        except SyntaxError as exc:
            raise _fail(loc, f"{module}:{exc.lineno}: {exc.msg}", "fix the syntax error", source_path) from None
        out[f"{LIB_PREFIX}{name}.py"] = text
        todo.extend(sorted(_imported_names(sub) - seen))
    return out


def _render_helper(helper: str) -> str:
    """A helper's text: real, importable, unit-tested modules are copied verbatim (never templated)."""
    return HELPERS[helper][1].read_text(encoding="utf-8")


def generation_prompt_suffix(model_dir: Path) -> str | None:
    """The text a local model's chat template ends a generation prompt with, or None when unknown.

    Best effort, no model load: reads tokenizer_config.json / chat_template.jinja and renders the
    template for one user message (hub ids and unusual templates give None).
    """
    try:
        template = None
        config: dict[str, Any] = {}
        if (model_dir / "tokenizer_config.json").is_file():
            config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
            template = config.get("chat_template")
        if isinstance(template, list):  # named templates: use the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        if template is None and (model_dir / "chat_template.jinja").is_file():
            template = (model_dir / "chat_template.jinja").read_text(encoding="utf-8")
        if not isinstance(template, str):
            return None
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def token(name: str) -> str:
            value = config.get(name)
            return value.get("content", "") if isinstance(value, dict) else (value or "")

        def raise_exception(message: str) -> NoReturn:
            raise ValueError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        return env.from_string(template).render(
            messages=[{"role": "user", "content": "Q"}], add_generation_prompt=True,
            bos_token=token("bos_token"), eos_token=token("eos_token"))
    except Exception:
        return None


def check_prefilled_think(spec: RunSpec) -> None:
    """trl#6966: a think_answer format reward must know whether the chat template opens <think>.

    With the wrong setting every completion scores 0 on format, so this is refused before rendering.
    Only checked for a model folder (local or in the HF cache) whose chat template can be rendered.
    """
    from finetune import hub

    model_dir = hub.cached_model(spec.model, spec.source.parent if spec.source else None)  # local or HF cache
    if model_dir is None:
        return
    suffix = generation_prompt_suffix(model_dir)
    if suffix is None:
        return
    opens_think = suffix.rstrip().endswith("<think>")
    for index, r in enumerate(spec.rewards):
        check = KINDS[r.type].template_check
        problem = check(r, opens_think) if check is not None else None
        if problem is not None:
            field, what, fix = problem
            raise _fail(f"rewards[{index}].{field}", what, fix, spec.source)


def spec_sources(spec: RunSpec) -> dict[str, str]:
    """File name → text of what ``render_rewards`` writes for ``spec`` (nothing written; `finetune status`
    compares it with the run directory)."""
    from finetune.hashing import reward_section_digest

    source = spec.source
    check_prefilled_think(spec)
    return render_sources(
        list(spec.rewards), run_name=spec.name, spec_path=str(source.name if source else "spec.yaml"),
        section_digest=reward_section_digest(spec.reward_section()),
        max_completion_length=spec.generation.max_completion_length, source_path=source,
        tool_env=spec.environment)


JUDGE_LOOPBACK = ("127.0.0.1", "localhost", "::1")  # the rendered judge's _JUDGE_LOOPBACK


def judge_hosts_allowed() -> list[str]:
    """The hosts a judge may call, as the rendered judge decides at each call: the person's judge_hosts (the
    plugin's userConfig, or FINETUNE_JUDGE_HOSTS in their own shell), or this machine without them."""
    from finetune.inspect.personkey import person_setting

    return [h.lower() for h in person_setting("judge_hosts")] or list(JUDGE_LOOPBACK)


def check_judge_hosts(spec: RunSpec) -> None:
    """Refuse to render a judge whose endpoint host the person did not allow, or whose api_key_env is not a name the
    person allowed (userConfig judge_key_envs, or FINETUNE_JUDGE_KEY_ENVS): prompts, completions and that key would
    go there (the rendered judge refuses a host at each call too; this says so up front)."""
    from finetune.inspect.personkey import person_setting

    allowed = judge_hosts_allowed()
    shown = ", ".join(allowed) if person_setting("judge_hosts") else "unset: this machine only"
    keys = person_setting("judge_key_envs")
    for index, r in enumerate(spec.rewards):
        endpoint = getattr(r, "endpoint", None)  # a kind that calls out over the network names an endpoint
        host = _host(endpoint).lower() if isinstance(endpoint, str) else None
        if host is not None and host not in allowed:
            raise _fail(f"rewards[{index}].endpoint",
                        f"judge host {host or '(none)'!r} is not an allowed judge host (FINETUNE_JUDGE_HOSTS: {shown})",
                        "use a judge on this machine, or the person adds it to the plugin's judge_hosts setting or "
                        "exports FINETUNE_JUDGE_HOSTS=" + (host or "HOST") + " in their own shell", spec.source)
        key = getattr(r, "api_key_env", None)
        if isinstance(key, str) and key not in keys:
            raise _fail(f"rewards[{index}].api_key_env",
                        f"api_key_env {key!r} is not a variable the person allowed a judge to read (judge_key_envs: "
                        f"{', '.join(keys) or 'none'})", "the person adds it to the plugin's judge_key_envs setting "
                        "(/plugin), or exports FINETUNE_JUDGE_KEY_ENVS=" + key + " in their own shell", spec.source)


def render_rewards(spec: RunSpec, out_dir: str | Path) -> list[Path]:
    """Write rewards.py and its helpers for ``spec`` (a RunSpec) into ``out_dir``, all or nothing.

    Helpers a previous render wrote and this spec no longer needs are removed, so the gate never
    binds a stale file. Returns the written paths.
    """
    out_dir = Path(out_dir)
    check_judge_hosts(spec)
    files = spec_sources(spec)
    # One commit, staged inside the run directory: rewards.py, its helpers and the removal of every helper
    # this spec no longer needs (the gate binds every rewards_*.py) land together — a crash leaves the old
    # set or, after the next run, the new one.
    from finetune import commit

    stale = tuple(p.name for p in out_dir.glob("rewards_*.py") if p.name not in files and p.is_file())
    _refuse_foreign(out_dir, files, stale)
    manifest = {RENDERED: jsonio.json_text(out_dir / RENDERED, {n: _sha256(t) for n, t in sorted(files.items())})}
    written = commit.commit_files(out_dir, {**files, **manifest}, remove=stale)
    return [p for p in written if p.name != RENDERED]


RENDERED = ".rewards_rendered.json"  # name -> sha256 of each file `rewards render` last wrote here


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refuse_foreign(out_dir: Path, files: dict[str, str], stale: tuple[str, ...]) -> None:
    """A rewards_*.py this render would overwrite or remove that `rewards render` did not write (not in its
    manifest, and not byte-identical to what it would write now) is the user's own: refused, nothing written."""
    import hashlib

    try:
        ours = json.loads((out_dir / RENDERED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        ours = {}
    ours = ours if isinstance(ours, dict) else {}
    for name in sorted({*files, *stale}):
        path = out_dir / name
        if name == rundir.REWARDS or not path.is_file() or name in ours:
            continue
        if name in files and hashlib.sha256(path.read_bytes()).hexdigest() == _sha256(files[name]):
            continue
        raise UserError(f"{path} was not written by `finetune rewards render`; rendering would "
                        f"{'overwrite' if name in files else 'remove'} it", where=str(path),
                        fix="move or rename your file (a reward's own code is named in the spec: `type: python`, "
                            "`file:`), then render again")
