"""The generated docs the renderer owns: the skill's recipe block and references/run-spec.md."""

from __future__ import annotations

import re

from finetune.variants import ALGORITHM_FIELDS


def test_skill_recipe_block_is_the_rendered_train_py_recipe(cli, tmp_path, repo_root):
    from finetune.config.render import skill_recipe_block

    block = skill_recipe_block()
    code = re.search(r"```python\n(.*)\n```", block, re.S).group(1)
    assert code.startswith("from trl import GRPOConfig, GRPOTrainer") and "grpo_args = GRPOConfig(" in code
    assert code.endswith("trainer.train()")
    for field in ALGORITHM_FIELDS:
        assert re.search(rf"^\s+{field}=", code, re.M), field
    # the same lines as in a real render of the shipped example spec
    import shutil

    run = tmp_path / "example"
    shutil.copytree(repo_root / "examples", run)
    assert cli("config", "render", run / "spec.yaml", "--no-gate").code == 0
    train_py = (run / "config" / "train.py").read_text()
    body = [ln.strip() for ln in code.splitlines() if ln.strip()]
    assert all(ln in {t.strip() for t in train_py.splitlines()} for ln in body)


def test_run_spec_reference_lists_every_field(repo_root):
    from pydantic import BaseModel

    from finetune.spec import RunSpec, run_spec_doc

    doc = run_spec_doc()

    def paths(model, prefix=""):
        for name, f in model.model_fields.items():
            key = f"{prefix}{f.alias or name}"
            yield key
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                yield from paths(f.annotation, key + ".")

    for path in paths(RunSpec):
        assert f"| `{path}` |" in doc, path
    assert "### `type: exact_match`" in doc and "| `rewards[].answer_column` |" in doc
    from finetune.docs import with_toc

    assert (repo_root / "references" / "run-spec.md").read_text() == with_toc(doc)
