# Quick start: `make demo` and `make test` set everything up themselves (.venv from pyproject.toml).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH  := $(VENV)/.bench-installed

.PHONY: demo test bench bench-tests bench-honest bench-extrapolation bench-replay bench-pfn bench-tables bench-check venv clean

$(STAMP): pyproject.toml
	@set -e; \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then \
	  base=$$(PYTHON="$(PYTHON)" sh scripts/find-python); \
	  echo "creating $(VENV) with $$base"; rm -rf $(VENV); "$$base" -m venv $(VENV); \
	fi; \
	echo "installing bayescale and its dependencies into $(VENV) (once; a few minutes)"; \
	$(PY) -m pip install --quiet --upgrade pip; \
	$(PY) -m pip install --quiet -e '.[test]'; \
	touch $(STAMP)

venv: $(STAMP)

# The benchmarks' extras (simple-scaling-laws, the peer they compare with; emcee; Dask).
$(BENCH): $(STAMP) pyproject.toml
	@echo "installing the benchmarks' extras into $(VENV) (once)"; \
	$(PY) -m pip install --quiet -e '.[bench]'; \
	touch $(BENCH)

demo: $(STAMP)
	$(VENV)/bin/bayescale demo --out out

# The tests run in one worker process per core (at most 4: each holds its own compiled programs, about 1.5 GiB),
# test files kept in order and handed to whichever worker is idle; TEST_WORKERS=0 runs them in this process. The
# fifteen slowest tests are listed at the end.
TEST_WORKERS ?= auto --maxprocesses 4

test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium not installed: the report's browser test will be skipped"
	JAX_PLATFORMS=cpu $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15

# Slow statistical checks (fuller coverage simulations), deselected from `make test`.
bench-tests: $(STAMP)
	JAX_PLATFORMS=cpu $(PY) -m pytest -q -m slow -n $(TEST_WORKERS) --dist worksteal

# Every table of benchmarks/RESULTS.md is the output of one command below (it names it above the table);
# `bench-tables` renders them all again from benchmarks/results/*.json without rerunning anything.
bench: $(BENCH)
	$(PY) -m benchmarks.speed
	$(PY) -m benchmarks.batching --sizes 1,4,16 --curves 16
	$(PY) -m benchmarks.fleet --workers 1,2
	$(PY) -m benchmarks.init
	$(PY) -m benchmarks.coverage
	$(PY) -m benchmarks.local_fit --worlds 16 --draws 500
	$(PY) -m benchmarks.report_screenshot
	$(PY) -m benchmarks.own_errors
	$(PY) -m benchmarks.first_answer --repeats 7

# Extrapolation on real data: every suite and method of STANDARD in benchmarks/extrapolation.py, tables and plots.
bench-extrapolation: $(BENCH)
	$(PY) -m benchmarks.extrapolation --standard

# Honest bands (issue 16): one NUTS fit per curve of six suites and the peer's bands (cached; about 75 min per
# noise model on 2 cores), then scores, for lognormal fits and for the default robust ones (which reuse the peer's
# bands cached by the first); the Chinchilla runs with each likelihood; the stacking average against its members.
bench-honest: $(BENCH)
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.honest_bands --stage fits
	$(PY) -m benchmarks.honest_bands --stage score
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.honest_bands --stage fits --likelihood logstudentt
	$(PY) -m benchmarks.honest_bands --stage score --likelihood logstudentt
	$(PY) -m benchmarks.robust_chinchilla
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.misspecified
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.stacking

# Run selection replayed on real and simulated data; then the run sets it chose refitted carefully.
bench-replay: $(BENCH)
	$(PY) -m benchmarks.active_learning
	$(PY) -m benchmarks.active_learning --suites chinchilla --strategies random,cheapest,grid,uncertain,grid+local,ours,ours_local --likelihood logstudentt --feasibility 0
	$(PY) -m benchmarks.active_learning --suites ic --likelihood logstudentt
	$(PY) -m benchmarks.active_learning --suites starts --strategies grid,ours,ours_local --likelihood logstudentt
	$(PY) -m benchmarks.active_learning --suites starts_dn1 --strategies grid,ours,ours_local --likelihood logstudentt
	$(PY) -m benchmarks.replay_rescore

# The PFN tables (pfn_prior_calibration, pfn_nuts, ...): calibration on prior draws, agreement with NUTS, speed.
bench-pfn: $(BENCH)
	$(PY) -m benchmarks.pfn --curves 1024 --nuts-curves 128 --draws 1000 --nuts-cache benchmarks/results/cache/pfn_nuts_matched.npz
	$(PY) -m benchmarks.pfn_views --views 1,2,4,8
	$(PY) -m benchmarks.pfn_error
	$(PY) -m benchmarks.pfn_speed --label current

bench-tables: $(BENCH)
	$(PY) -m benchmarks.tables

# The tables match their result files; the benchmarks' own bookkeeping checks and quick runs (a few minutes).
bench-check: $(BENCH)
	$(PY) -m benchmarks.tables --check
	$(PY) -m benchmarks.tables --self-check
	$(PY) -m benchmarks.replay_rescore --self-check
	$(PY) -m benchmarks.honest_bands --stage self-check
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.extrapolation --self-check
	JAX_PLATFORMS=cpu $(PY) -m benchmarks.speed --self-check

clean:
	rm -rf $(VENV) out .pytest_cache
