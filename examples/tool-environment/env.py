"""A calculator the model must use: the episode is solved when add() ran on the row's two numbers."""


class Calculator:
    def reset(self, a=0, b=0, **row):
        self.a, self.b, self.calls = int(a), int(b), []

    def add(self, a: int, b: int):
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.calls.append((a, b))
        return a + b

    def get_reward(self) -> float:
        return 1.0 if sorted([self.a, self.b]) in [sorted(c) for c in self.calls] else 0.0
