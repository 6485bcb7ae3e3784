# Quick start: `make demo` and `make test` set everything up themselves (.venv from pyproject.toml).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-tests bench-extrapolation venv clean

$(STAMP): pyproject.toml
	@set -e; \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then \
	  base=$$(PYTHON="$(PYTHON)" sh scripts/find-python); \
	  echo "creating $(VENV) with $$base"; rm -rf $(VENV); "$$base" -m venv $(VENV); \
	fi; \
	$(PY) -m pip install --quiet --upgrade pip; \
	$(PY) -m pip install --quiet -e '.[test]'; \
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bayescale demo --out out

test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium not installed: the report's browser test will be skipped"
	JAX_PLATFORMS=cpu $(PY) -m pytest -q

# Slow statistical checks (fuller coverage simulations), deselected from `make test`.
bench-tests: $(STAMP)
	JAX_PLATFORMS=cpu $(PY) -m pytest -q -m slow

# Benchmarks write benchmarks/results/*.json and benchmarks/RESULTS.md.
bench: $(STAMP)
	$(PY) -m benchmarks.speed
	$(PY) -m benchmarks.batching
	$(PY) -m benchmarks.init
	$(PY) -m benchmarks.init --laws BNSL2 --curves 12 --target-accept 0.9,0.99
	$(PY) -m benchmarks.coverage

# Extrapolation on real data (benchmarks/extrapolation.py): the standard set, then the RESULTS.md tables.
EXTRAP := $(PY) -m benchmarks.extrapolation
bench-extrapolation: $(STAMP)
	for m in nuts:M4 nuts:M2 nuts:M3 ls:M4 boot:M4 bma; do $(EXTRAP) --suite revisiting --method $$m || exit 1; done
	$(EXTRAP) --suite chinchilla --method all
	$(EXTRAP) --suite gadre --method all
	for m in nuts:M4 nuts:M2 ls:M4 boot:M4 bma; do $(EXTRAP) --suite colpret --method $$m --limit 16 || exit 1; done
	$(EXTRAP) --table

clean:
	rm -rf $(VENV) out .pytest_cache
