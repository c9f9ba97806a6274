# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DW     := $(VENV)/bin/dw
STAMP  := $(VENV)/.installed

.PHONY: demo readme-demo test install bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

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
