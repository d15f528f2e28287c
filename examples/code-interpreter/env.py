"""A code interpreter: the model answers a computation by running Python in the sandbox.

Its one tool, `python`, runs the model's snippet through `rewards_sandbox.run_python` (the plugin's sandbox,
copied beside rewards.py by `finetune rewards render` because this file imports it, and bound by the gate):
no network, no file outside its scratch dir, limits on time, memory and output. What the snippet prints
comes back as the tool's result; an error, a timeout or an attack comes back as text, never as a crash.
The episode is solved when a program the model ran printed the row's answer on its last line.
"""

from rewards_sandbox import run_python


class CodeInterpreter:
    def reset(self, answer=None, **row):
        self.answer = None if answer is None else str(answer).strip()
        self.outputs = []

    def python(self, code: str) -> str:
        """Run a Python program and return what it prints. Print every value you need to see.

        Args:
            code: The Python source code to run.
        """
        result = run_python(code)
        self.outputs.append(result)
        return result

    def get_reward(self) -> float:
        """1.0 when a program the model ran printed the answer on its last line (and ended cleanly)."""
        last_lines = [out.rstrip("\n").split("\n")[-1].strip() for out in self.outputs if out.strip()]
        return 1.0 if self.answer is not None and self.answer in last_lines else 0.0
