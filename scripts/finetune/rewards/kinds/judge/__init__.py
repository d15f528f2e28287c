"""The `judge` reward kind: rubric-as-reward, an OpenAI-compatible chat endpoint scores the completion."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from finetune.rewards.kind import Gold, Reading, kind
from finetune.rewards.specs import RewardBase


@kind("Rubric-as-reward judge", order=90,
      reading=lambda r: Reading(), fix="the `rubric` (and `max_points` / `threshold`)", caches=("_JUDGE_CACHE",),
      columns=lambda r: [],
      # the judge sees the prompt and the completion only; the probes take the right answer from the dataset's
      # answer column (a rubric that credits a wrong answer fails them)
      gold=lambda r, dataset: Gold(dataset.answer_column, "answer", read=False) if dataset.answer_column else None,
      reasons={},
      remedies={"gold_answer_fails": "the `rubric` (the judge scores the gold answer below the threshold)"},
      stdlib=("concurrent.futures", "hashlib", "json", "os", "re", "time", "urllib.error", "urllib.request"),
      example={"name": "rubric_score", "type": "judge", "endpoint": "http://localhost:8000/v1",
               "model": "Qwen/Qwen3-8B", "rubric": "10: complete, correct and concise. 5: correct but padded. "
               "0: wrong or off-topic.", "max_points": 10})
class JudgeReward(RewardBase):
    """Rubric-as-reward: an OpenAI-compatible chat endpoint scores the completion 0..max_points."""

    type: Literal["judge"]
    endpoint: str = Field("http://localhost:8000/v1", description="Base URL of an OpenAI-compatible "
                          "server (e.g. `vllm serve`); /chat/completions is appended. Its host must be loopback or "
                          "listed in FINETUNE_JUDGE_HOSTS (comma-separated, set by the person in their own shell): "
                          "the rendered reward sends nothing elsewhere and never follows a redirect.")
    model: str = Field(description="Model name the judge server serves.")
    rubric: str = Field(min_length=1, description="Scoring rubric (system message; the completion cannot alter it).")
    max_points: int = Field(10, ge=1, le=100, description="The judge scores 0..max_points; the reward is "
                            "points / max_points.")
    timeout_s: float = Field(30.0, gt=0, le=600, description="Per request.")
    retries: int = Field(2, ge=0, le=10, description="Extra attempts after a timeout, 5xx, 429 or a reply "
                         "that is not exactly `SCORE: <n>`.")
    concurrency: int = Field(8, ge=1, le=256, description="Requests in flight at most.")
    cache: bool = Field(True, description="Reuse scores of identical (prompt, completion); disable_caches() "
                        "bypasses it.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key; sent only "
                                       "to the endpoint's host, when that host is allowed (see endpoint).")
    max_tokens: int = Field(16, ge=1, description="The judge must answer `SCORE: <n>`; nothing longer.")

    @field_validator("endpoint")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("endpoint must start with http:// or https://")
        return v.rstrip("/")

    def lowest_pass(self) -> float:
        return math.ceil(round(self.pass_threshold * self.max_points, 9)) / self.max_points

    def pass_gap(self) -> float:
        # Scores are multiples of 1/max_points: the best failing score is one point below the lowest pass.
        return 1.0 / self.max_points
