# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DW     := $(VENV)/bin/dw
STAMP  := $(VENV)/.installed

.PHONY: demo readme-demo test test-fast lint docs test-reliability install bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# 4 workers on the 2-core CI machine: two of them hold the SLURM groups (tests/conftest.py), which
# mostly wait on their clusters, while the other two keep both cores busy.
test: lint
	$(PY) -m pytest -q -n 4 --dist loadgroup --no-loadscope-reorder

# The fast tier (2-3.5 minutes on an idle 2-core machine: 1 min 55 s on 2026-12-04, 2 min 30 s on
# 2026-12-06; docs/benchmarks.md): every test but those on a SLURM test cluster and the
# modules tests/slow.txt lists (each over 20 s); `make test` runs them all.
test-fast: lint
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow"

# Formatting, lint, the import-layer contract (pyproject.toml) and the documentation site built
# --strict (a broken link or anchor, a missing page or one left out of mkdocs.yml's nav fails it);
# `make test` runs it first.  tests/test_docs.py checks the generated references are up to date.
lint: $(STAMP)
	$(VENV)/bin/ruff format --check --quiet depthwidth tests benchmarks scripts
	$(VENV)/bin/ruff check --quiet depthwidth tests benchmarks scripts
	$(VENV)/bin/lint-imports --no-cache
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The documentation site: regenerate docs/reference/ from the code (scripts/gen_docs.py), build
# site/ --strict, then serve it on http://127.0.0.1:8000 (Ctrl-C stops; SERVE=0: build only).
SERVE ?= 1
docs: $(STAMP)
	$(PY) scripts/gen_docs.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	if [ "$(SERVE)" = 1 ]; then NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve; fi

# The fault-injection suite (tests/reliability, and the real-cluster scenarios of automatic retries,
# queue limits and the follow-up job; all also part of `make test`) in one line:
# faults injected, runs recovered, records lost, duplicates.  Fails unless 0 lost, 0 duplicated
# and every test passed (then the failures are shown first).
test-reliability: $(STAMP)
	@d=$$(mktemp -d); \
	DW_RELIABILITY_LEDGER=$$d/ledger $(PY) -m pytest -q -p no:cacheprovider tests/reliability \
	  tests/test_retry.py tests/test_slurm_limits.py tests/test_followup.py > $$d/log 2>&1; t=$$?; \
	if [ $$t -ne 0 ]; then tail -n 40 $$d/log; fi; \
	touch $$d/ledger; $(PY) -m tests.reliability.summary $$d/ledger; s=$$?; \
	rm -rf $$d; [ $$t -eq 0 ] && [ $$s -eq 0 ]

# CPU micro-sweep (sweeps/demo.yaml) on 2 local workers with a live status
# table, then `dw fit` and `dw report --plots out/demo`.  Reruns skip done runs.
demo: $(STAMP)
	DW=$(DW) bash scripts/demo.sh

# Regenerate the README's demo section (between its demo markers) and
# docs/demo_loss_vs_depth.png + docs/demo_entropy.png from the real demo output (runs `make demo` first
# when there is no fitted demo store yet).
readme-demo: $(STAMP)
	test -f $${DW_RUNS:-runs}/demo/fit.json || $(MAKE) demo
	$(DW) report demo --plots out/demo > /dev/null
	$(PY) -m depthwidth.report.readme --readme README.md --report out/demo --figure docs/demo_loss_vs_depth.png --entropy-figure docs/demo_entropy.png

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs out
