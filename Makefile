# Two entry points (README): `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,plot,notebooks]'
	touch $@

.PHONY: venv demo test test-slow bench bench-stdlib notebooks
venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VPY) -m nki_lite.demo

test: $(VENV)/.installed
	$(VPY) -m pytest -q -n 2 -p no:cacheprovider tests

test-slow: $(VENV)/.installed
	NKI_LITE_SLOW_TESTS=1 $(VPY) -m pytest -q -n 2 -p no:cacheprovider tests

bench: $(VENV)/.installed
	$(VPY) -m pip install -q -e '.[bench]'
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(VPY) benchmarks/jit.py

bench-stdlib: $(VENV)/.installed
	$(VPY) -m pip install -q -e '.[bench]'
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(VPY) benchmarks/stdlib.py

# tutorials/NN_*.ipynb are generated from their jupytext percent-format .py sources (no outputs);
# tests/test_notebooks.py checks each pair is in sync and executes every notebook
notebooks: $(VENV)/.installed
	$(VENV)/bin/jupytext --to ipynb --update --update-metadata '{"jupytext": null}' tutorials/[0-9][0-9]_*.py
