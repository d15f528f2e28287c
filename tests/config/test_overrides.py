"""Every GRPOConfig field of the installed TRL is classified once (an upgrade that adds one fails here), and an
override passes only from the allowlist."""

from __future__ import annotations

import pytest

from finetune.config import overrides as O
from finetune.errors import UserError
from finetune.variants import ALGORITHM_FIELDS


def test_every_installed_grpo_field_is_classified_once_and_nothing_else_is():
    fields = set(O.grpo_fields())
    classes = {"pass": set(O.PASSES), "licensed": set(O.LICENSED), "refused": set(O.REFUSED),
               "gated": set(O.GATED_OVERRIDES), "algorithm": set(ALGORITHM_FIELDS), "spec": set(O.SPEC_OWNED),
               "alias": set(O.deprecated_aliases())}
    unclassified = sorted(fields - set(O.classified()))
    assert not unclassified, f"classify these GRPOConfig fields in finetune.config.overrides: {unclassified}"
    stale = sorted(set(O.classified()) - fields)
    assert not stale, f"not GRPOConfig fields of the installed TRL: {stale}"
    names = sorted(classes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not classes[a] & classes[b], (a, b, sorted(classes[a] & classes[b]))


class _Spec:
    def __init__(self, **overrides: object) -> None:
        self.overrides = overrides


def test_a_field_a_trl_upgrade_adds_is_refused_until_classified(monkeypatch):
    real = O.grpo_fields()
    monkeypatch.setattr(O, "grpo_fields", lambda: [*real, "shiny_new_knob"])
    with pytest.raises(UserError) as exc:
        O.check_overrides(_Spec(shiny_new_knob=1))  # type: ignore[arg-type]
    assert "no one has classified" in exc.value.line() and "overrides.shiny_new_knob" in exc.value.line()
    assert O.check_overrides(_Spec(save_total_limit=2))["save_total_limit"].value == 2  # type: ignore[arg-type]


def test_each_passing_override_carries_its_effect_and_licensed_ones_are_named_for_the_licence():
    out = O.check_overrides(_Spec(save_total_limit=2, dataloader_num_workers=2,  # type: ignore[arg-type]
                                  max_grad_norm=1e6))
    assert "checkpoint cadence" in out["save_total_limit"].reason
    assert "data-loading speed" in out["dataloader_num_workers"].reason
    assert "learning rate's licence" in out["max_grad_norm"].reason
    assert O.licensed_changes({"max_grad_norm": 1e6, "save_total_limit": 2}) == [
        "overrides.max_grad_norm=1000000.0 (the optimiser's update)"]
