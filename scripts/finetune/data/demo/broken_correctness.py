

# ---------------------------------------------------------------------------------------------
# DELIBERATELY BROKEN by `finetune demo` (its FAIL demonstration). A hand edit below the rendered
# code replaces the exact match with a substring check — the bug of Visual-RFT#176: any completion
# that mentions the gold digits scores 1.0, so a hedge ("<answer>471 or 174</answer>") and an
# untagged "Answer 471" are credited as correct. The Phase 1 gate must refuse this file.
# ---------------------------------------------------------------------------------------------


def correct(prompts=None, completions=None, answer=None, **kwargs) -> list:
    """Substring match of the gold answer anywhere in the completion (BROKEN on purpose)."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if gold is not None and str(gold) in text else 0.0 for text, gold in zip(texts, answer)]


REWARD_FUNCS = [format_ok, correct]  # noqa: F821 (format_ok is the rendered format reward above)
