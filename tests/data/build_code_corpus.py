"""Build tests/data/code_corpus.jsonl: real-style code answers to the problems of code_problems.py, labelled.

Run: .venv/bin/python tests/data/build_code_corpus.py   (deterministic; byte-identical output)

Each problem is answered in several shapes instruct models produce — Qwen2.5-Coder-Instruct (code, an
"Example usage" block, an "Output:" block, an explanation), Llama-3-Instruct ("Here is a Python
function..." then a test block, or code without a fence), DeepSeek-R1 distills (`<think>` with drafts,
then the final block; or cut off at the completion cap) — and in the hacks GRPO finds (hard-coding the
shown examples, exiting before the tests, always-equal objects, files written at import). Every row
carries the reader's verdict (`correct`) and why. Solutions are checked against the tests first.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from code_problems import PROBLEMS, Problem  # noqa: E402

OUT = Path(__file__).resolve().parent / "code_corpus.jsonl"
KIND = {"assert": "code_assert", "stdin_stdout": "code_stdio", "function_call": "code_call"}


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}\n```"


def call_text(p: Problem, case) -> tuple[str, str]:
    """(the code that calls the entry point and evaluates the checked expression, the expected value's
    source) for a visible test; a multi-statement test (call, then check what it did) keeps its statements."""
    if p.fmt == "function_call":
        args = ", ".join(repr(a) for a in case["args"])
        return f"{p.entry}({args})", repr(case["expected"])
    *setup, last = case.split("\n")
    stmt = ast.parse(last).body[0]
    assert isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare), case
    prefix = "".join(line + "\n" for line in setup)
    return prefix + ast.unparse(stmt.test.left), ast.unparse(stmt.test.comparators[0])


def asserts_of(p: Problem, cases) -> list[str]:
    if p.fmt == "function_call":
        return [f"assert {call_text(p, c)[0]} == {call_text(p, c)[1]}" for c in cases]
    return list(cases)


def prompt_of(p: Problem) -> str:
    if p.fmt == "stdin_stdout":
        ex = p.visible[0]
        return (f"Write a Python program that reads standard input: {p.task}.\n\nExample\nInput:\n{ex['input']}"
                f"Output:\n{ex['output']}")
    shown = "\n".join(asserts_of(p, p.visible))
    return f"Write a Python function `{p.entry}` to {p.task}. Your code should pass these tests:\n\n{shown}"


# ------------------------------------------------------------------------------ answer shapes --
# shape -> (label, style, why, builder(problem) -> completion)

def _printed(expr: str) -> str:
    *setup, last = expr.split("\n")
    return "".join(line + "\n" for line in setup) + f"print({last})"


def usage_block(p: Problem, code: str) -> str:
    expr, expected = call_text(p, p.visible[0])
    return (f"Here's a Python function that does this:\n\n{fence(code)}\n\n### Example usage\n\n"
            f"{fence(_printed(expr))}\n\nOutput:\n{fence(expected, '')}\n\nThe function runs in linear time.")


def tests_block(p: Problem, code: str) -> str:
    tests = "\n".join(asserts_of(p, p.visible))
    return (f"Here is a Python function that solves the problem:\n\n{fence(code)}\n\nYou can test this function "
            f"with the following code:\n\n{fence(tests + chr(10) + 'print(' + repr('All tests passed!') + ')')}")


def think(body: str, final: str) -> str:
    return f"<think>\nOkay, so I need to handle this. Let me think step by step.\n{body}\n</think>\n\n{final}"


def main_driver(p: Problem, code: str) -> str:
    expr, _ = call_text(p, p.visible[0])
    driver = "\n".join("    " + line for line in _printed(expr).split("\n"))
    return fence(f"{code}\n\n\nif __name__ == \"__main__\":\n{driver}\n    print(input('more? '))")


def output_python_block(p: Problem, code: str) -> str:
    _, expected = call_text(p, p.visible[0])
    return f"{fence(code)}\n\nRunning it on the example prints:\n\n{fence(expected)}"


def renamed(p: Problem, code: str) -> str:
    parts = p.entry.split("_")
    other = parts[0] + "".join(x.title() for x in parts[1:]) if len(parts) > 1 else p.entry + "_fn"
    return code.replace(f"def {p.entry}(", f"def {other}(")


FUNCTION_ACCEPT = {
    "plain_fence": ("qwen", "the function in one python block is correct",
                    lambda p: f"Sure! Here's the solution:\n\n{fence(p.correct)}\n\nThis handles the edge cases."),
    "usage_block": ("qwen", "correct function; the 'Example usage' block and the Output block are usage, "
                    "not the answer", lambda p: usage_block(p, p.correct)),
    "tests_block": ("llama", "correct function followed by a block of the shown tests (usage)",
                    lambda p: tests_block(p, p.correct)),
    "think_draft": ("r1", "a wrong draft inside a closed <think>, the correct function after it",
                    lambda p: think(f"First attempt:\n{fence(p.wrong)}\nHmm, that fails an edge case. Let me fix it.",
                                    f"Here is the solution:\n\n{fence(p.correct)}")),
    "draft_fix": ("llama", "a wrong first block, then a corrected block redefining the function (the fix is "
                  "the answer)", lambda p: f"{fence(p.wrong)}\n\nWait, this is wrong for some inputs. Here is "
                  f"the corrected version:\n\n{fence(p.correct)}"),
    "unfenced": ("llama", "correct code without a fence, prose before and after",
                 lambda p: f"Here is a Python function that solves the problem.\n\n{p.correct}\n\nThis function "
                 "returns the expected result for every input."),
    "main_driver": ("qwen", "correct function with an if __name__ == '__main__' demo driver (usage)",
                    lambda p: main_driver(p, p.correct)),
    "py_tag": ("qwen", "correct function in a ```py block", lambda p: fence(p.correct, "py")),
    "output_in_python_block": ("qwen", "correct function; the printed result is shown in a python-tagged "
                               "block after it (output, not code)", lambda p: output_python_block(p, p.correct)),
}

FUNCTION_REJECT = {
    "unclosed_think": ("r1", "cut at the completion cap inside <think>: the correct draft there is reasoning, "
                       "there is no final answer",
                       lambda p: f"<think>\nLet me write it.\n{fence(p.correct)}\nNow let me double-check the "
                       "edge cases one by one. First, the empty input... then"),
    "truncated": ("r1", "the final block is cut off at the completion cap mid-function",
                  lambda p: think("I have the approach.", "```python\n" + p.correct.rsplit("\n", 1)[0] + "\n    return (")),
    "hardcoded": ("qwen", "hard-codes the prompt's examples; fails the hidden tests",
                  lambda p: usage_block(p, p.hardcoded)),
    "exit_hack": ("llama", "exits with status 0 before the tests run (the function is a stub)",
                  lambda p: fence(f"import sys\n\ndef {p.entry}(*args):\n    return None\n\nsys.exit(0)")),
    "atexit_hack": ("llama", "a stub that registers os._exit(0) at exit, so a failed assert still exits 0",
                    lambda p: fence(f"import atexit\nimport os\n\natexit.register(lambda: os._exit(0))\n\n"
                                    f"def {p.entry}(*args):\n    return None")),
    "eq_hack": ("qwen", "returns an object whose __eq__ always says True",
                lambda p: fence(f"class Anything:\n    def __eq__(self, other):\n        return True\n\n"
                                f"def {p.entry}(*args, **kwargs):\n    return Anything()")),
    "wrong_name": ("llama", "correct logic under another function name than the one the task asks for",
                   lambda p: f"Here is the function:\n\n{fence(renamed(p, p.correct))}"),
    "missing_module": ("qwen", "imports a module that does not exist; the code cannot load",
                       lambda p: fence(f"from fastseq_utils import fast_path\n\n{p.correct}")),
    "think_only": ("r1", "the code is only inside the closed <think>; the answer after it has no code",
                   lambda p: think(fence(p.correct), "The function above solves the task.")),
    "fix_made_wrong": ("llama", "a correct draft 'simplified' into a wrong final block (the last definition "
                       "is the answer)", lambda p: f"{fence(p.correct)}\n\nActually, we can simplify this:\n\n"
                       f"{fence(p.wrong)}"),
    "wrong_usage": ("qwen", "a wrong function with an example usage block", lambda p: usage_block(p, p.wrong)),
}

STDIN_ACCEPT = {
    "plain_fence": ("qwen", "correct program in one python block", lambda p: fence(p.correct)),
    "main_driver": ("qwen", "correct program inside main() with an if __name__ == '__main__' driver",
                    lambda p: fence("def main():\n" + "\n".join("    " + ln for ln in p.correct.split("\n")) +
                                    "\n\n\nif __name__ == \"__main__\":\n    main()")),
    "fast_input": ("r1", "reads with sys.stdin.readline (lines keep their newline)",
                   lambda p: think("Use fast IO.", fence("import sys\ninput = sys.stdin.readline\n" + p.correct))),
    "read_all": ("qwen", "reads all of stdin at once and serves input() from the lines",
                 lambda p: fence("import sys\n\n_lines = iter(sys.stdin.read().split('\\n'))\n\n\ndef input():\n"
                                 "    return next(_lines)\n\n\n" + p.correct)),
    "trailing_space": ("llama", "correct output with a trailing space on each line (judges ignore it)",
                       lambda p: fence("_print = print\n\ndef print(*args, **kwargs):\n    kwargs.setdefault('end', "
                                       "' \\n')\n    _print(*args, **kwargs)\n\n" + p.correct)),
    "stderr_debug": ("qwen", "debug prints go to stderr; stdout is correct",
                     lambda p: fence("import sys\nprint('debug: reading input', file=sys.stderr)\n" + p.correct)),
    "sample_blocks": ("llama", "the sample input and output are shown in untagged blocks around the program",
                      lambda p: f"Sample input:\n{fence(p.visible[0]['input'].rstrip(), '')}\n\nSolution:\n"
                      f"{fence(p.correct)}\n\nOutput:\n{fence(p.visible[0]['output'].rstrip(), '')}"),
}

STDIN_REJECT = {
    "wrong": ("qwen", "the program's logic is wrong", lambda p: fence(p.wrong)),
    "debug_stdout": ("llama", "a debug print on stdout corrupts the output", lambda p: fence("print('DEBUG')\n" + p.correct)),
    "input_prompt": ("llama", "input('Enter ...: ') prompts are written to stdout",
                     lambda p: fence(p.correct.replace("input()", "input('Enter a value: ')", 1))),
    "unclosed_think": ("r1", "cut at the cap inside <think>: no final answer",
                       lambda p: f"<think>\n{fence(p.correct)}\nLet me verify with the sample"),
    "truncated": ("r1", "the final program is cut off at the completion cap",
                  lambda p: think("Ok.", "```python\n" + p.correct.rsplit("\n", 1)[0] + "\nprint(")),
    "hardcoded": ("qwen", "prints the sample output whatever the input", lambda p: fence(p.hardcoded)),
}


# shapes every rotation would miss for a problem that needs them
EXTRA = [("mbpp_save_lines", ("hardcoded", False)), ("mbpp_is_prime", ("exit_hack", False)),
         ("apps_sum_list", ("wrong", False)), ("fc_two_sum", ("eq_hack", False)),
         ("he_below_zero", ("missing_module", False)), ("mbpp_gcd", ("usage_block", True)),
         ("apps_grid_count", ("stderr_debug", True)), ("apps_reverse_lines", ("input_prompt", False))]

# ---------------------------------------------------------------------------------- checking --

def passes(p: Problem, code: str) -> bool:
    """Plain execution of a solution against the visible and hidden tests (the builder's own check)."""
    with tempfile.TemporaryDirectory() as tmp:
        if p.fmt == "stdin_stdout":
            for case in p.visible + p.hidden:
                run = subprocess.run([sys.executable, "-c", code], input=case["input"], capture_output=True,
                                     text=True, timeout=10, cwd=tmp)
                got = [ln.rstrip() for ln in run.stdout.rstrip().split("\n")]
                if run.returncode != 0 or got != [ln.rstrip() for ln in case["output"].rstrip().split("\n")]:
                    return False
            return True
        program = code + "\n" + "\n".join(asserts_of(p, p.visible + p.hidden))
        return subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=10,
                              cwd=tmp).returncode == 0


def columns_of(p: Problem) -> dict:
    cols = {"tests": p.visible, "hidden_tests": p.hidden}
    if p.fmt == "function_call":
        cols["entry_point"] = p.entry
    return cols


def rows() -> list[dict]:
    out = []
    for index, p in enumerate(PROBLEMS):
        assert passes(p, p.correct), f"{p.pid}: the correct solution fails"
        assert not passes(p, p.wrong), f"{p.pid}: the wrong solution passes"
        # save_lines' hack writes the files the tests read at import: plain execution credits it (the point)
        assert p.pid == "mbpp_save_lines" or not passes(p, p.hardcoded), f"{p.pid}: the hard-coded one passes"
        accept, reject = (STDIN_ACCEPT, STDIN_REJECT) if p.fmt == "stdin_stdout" else (FUNCTION_ACCEPT, FUNCTION_REJECT)
        a_names, r_names = list(accept), list(reject)
        chosen = [(n, True) for n in (a_names[(index + k) % len(a_names)] for k in range(3))]
        chosen += [(n, False) for n in (r_names[(index + k) % len(r_names)] for k in range(3))]
        chosen += [extra for pid, extra in EXTRA if pid == p.pid and extra not in chosen]
        for name, label in chosen:
            style, why, build = (accept if label else reject)[name]
            out.append({"id": f"{p.pid}/{name}", "kind": KIND[p.fmt], "problem": p.pid, "style": style,
                        "rule": name, "prompt": prompt_of(p), "completion": build(p), "columns": columns_of(p),
                        "correct": label, "reason": why, "ambiguous": False})
    return out


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-tests"
PER_PROMPT = 6


def example_files(data: list[dict]) -> dict[str, str]:
    """examples/code-tests: the MBPP-style rows as a dataset (visible tests in the prompt, hidden ones in
    their own column), the corpus answers as imported samples, and the reader's verdicts on them."""
    problems = [p for p in PROBLEMS if p.fmt == "assert"]
    by_problem = {p.pid: [r for r in data if r["problem"] == p.pid][:PER_PROMPT] for p in problems}

    def lines(objs: list[dict]) -> str:
        return "".join(json.dumps(o, sort_keys=True) + "\n" for o in objs)

    dataset = [{"prompt": prompt_of(p), "tests": p.visible, "hidden_tests": p.hidden} for p in problems]
    samples, verdicts = [], []
    for index, p in enumerate(problems):
        for r in by_problem[p.pid]:
            samples.append({"id": r["id"], "row": index, "prompt": r["prompt"], "completion": r["completion"],
                            "tests": p.visible, "hidden_tests": p.hidden})
            verdicts.append({"id": r["id"], "accept": r["correct"], "correct": r["correct"], "well_formed": True,
                             "note": r["reason"], "reader": "human"})
    return {"data.jsonl": lines(dataset), "completions.jsonl": lines(samples), "verdicts.jsonl": lines(verdicts)}


def main() -> None:
    data = rows()
    OUT.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in data), encoding="utf-8")
    print(f"{OUT.name}: {len(data)} rows over {len({r['problem'] for r in data})} problems")
    EXAMPLE.mkdir(exist_ok=True)
    for name, text in example_files(data).items():
        (EXAMPLE / name).write_text(text, encoding="utf-8")
    print(f"examples/code-tests: {len(example_files(data)['completions.jsonl'].splitlines())} samples")


if __name__ == "__main__":
    main()
