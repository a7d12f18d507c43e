# neuron-compat: the two commands of the README are `make run` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
JOBS ?=
SWEEP_ARGS ?=

.PHONY: install run sweep models serve test test-slow lint bench browser-deps clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	$(PY) -m venv $(VENV)

# Re-install only when the dependency list changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

# The device's C++ core (neuron_backend/core.py): compiled once with g++ and ninja, rebuilt when its source changes.
# The install is an order-only prerequisite: a re-install alone does not rebuild it here (a new torch makes the built
# core stale by its digest, and the first import rebuilds it), so `make -n <target>` after an install shows only the
# target's own commands.
CORE := neuron_backend/csrc/build/neuron_core.so
$(CORE): $(wildcard neuron_backend/csrc/*.cpp neuron_backend/csrc/*.h) neuron_backend/core.py | $(STAMP)
	@command -v g++ >/dev/null 2>&1 || { echo "need a C++ compiler: apt-get install g++"; exit 1; }
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(BIN)/python -c "from neuron_backend import core; print(core.ensure_built())"
	@touch $(CORE)

install: $(STAMP) $(CORE)

# Chromium for the dashboard's browser tests, from Debian's packages (no browser download at run time).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: could not install chromium; browser tests will be skipped"; }

# The main job on the embedded default: SQLite under ./var, in-process workers, bundled neuron device.
# The port is checked first: a busy one fails at once, naming PORT=, not after minutes of sweeping.
run: $(STAMP) $(CORE)
	@$(BIN)/compat serve --check-port --from-make --host $(HOST) --port $(PORT)
	$(BIN)/compat db upgrade
	$(BIN)/compat sweep $(if $(JOBS),--jobs $(JOBS)) $(SWEEP_ARGS)
	@echo "$(MODELS_NOTE)"
	$(BIN)/compat serve --from-make --host $(HOST) --port $(PORT)

sweep: $(STAMP) $(CORE)
	$(BIN)/compat sweep $(if $(JOBS),--jobs $(JOBS)) $(SWEEP_ARGS)

# Per-model verdicts and real-size plans over the shipped corpus (issue 33): `compat lookup ORG/NAME` then answers.
# Not part of `make run`: it costs the corpus's distinct tiny configs (59 runs for its 79 models), measured at about
# 0.6x the registry sweep's own pass (bench/README.md), so `make run` says how to add it instead.
MODELS_NOTE := per-model verdicts (compat lookup ORG/NAME, /models) are not part of make run: run \`make models\` \
  (= compat sweep --models: the corpus's 79 models, one run per distinct tiny config, 59; about 0.6x this sweep's time)
models: $(STAMP) $(CORE)
	$(BIN)/compat sweep --models $(if $(JOBS),--jobs $(JOBS))

serve: $(STAMP) $(CORE)
	$(BIN)/compat serve --from-make --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo --no-cache

# The whole default suite. The import-layer contract first (`lint-imports`: [tool.importlinter] in pyproject.toml;
# tests/layout proves each contract can fail and checks function-local imports). Exit code 5 (no tests ran) is a
# failure, not a pass. pytest-xdist (a dev dependency): TEST_WORKERS processes (2: CI's box has two cores; 0 runs
# serially), --dist loadgroup so tests that share a module- or session-scoped result run on one worker and build it
# once (tests/conftest.py groups them); every other test goes to whichever worker is free.
TEST_WORKERS ?= 2
PYTEST_ARGS := -q -p no:cacheprovider $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)
test: $(STAMP) $(CORE) browser-deps
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo --no-cache
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests ran: failing"; exit 1; fi; exit $$rc

# The long sweeps left out of `make test` (`@pytest.mark.slow`; bench/README.md, "Test suite time", lists them).
test-slow: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m slow; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests ran: failing"; exit 1; fi; exit $$rc

bench: $(STAMP)
	@echo "see bench/README.md for each benchmark's command"

clean:
	rm -rf var .pytest_cache
