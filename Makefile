# Quick start: `make demo` and `make test` set everything up themselves (.venv from pyproject.toml).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-tests venv clean

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
	JAX_PLATFORMS=cpu $(PY) -m pytest -q

# Slow statistical checks (fuller coverage simulations), deselected from `make test`.
bench-tests: $(STAMP)
	JAX_PLATFORMS=cpu $(PY) -m pytest -q -m slow

# Benchmarks write benchmarks/results/*.json and benchmarks/RESULTS.md.
bench: $(STAMP)
	$(PY) -m benchmarks.speed
	$(PY) -m benchmarks.batching
	$(PY) -m benchmarks.init
	$(PY) -m benchmarks.coverage

clean:
	rm -rf $(VENV) out .pytest_cache
