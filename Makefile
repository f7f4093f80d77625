# Two commands do everything on a fresh machine (Python 3.11 with venv):
#   make demo   create .venv, install the core and the four plugins without their optional extras (no torch,
#               dlib or ASR: about a minute from a clone), run the main job
#   make test   the full set-up (torch, dlib, ASR, the test/docs/dask/seba extras), then the linters and the
#               whole test suite (incl. the plugin template's tests)
# Both are idempotent: each set-up reruns only when a pyproject.toml changed. One venv, two stamps: the full
# set-up is a superset of the demo's, so after `make test` the demo installs nothing.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.bioanon-setup
LEAN_STAMP := $(VENV)/.bioanon-demo
PIP    := $(BIN)/python -m pip --disable-pip-version-check
PLUGINS := plugins/face plugins/gait plugins/voice plugins/motion
TORCH  := torch==2.14.1 torchvision==0.29.1
# before installing, check the disk has room (GiB the finished venv takes; SPACE_CHECK=no skips the check)
SPACE_CHECK ?= yes
FREE_SPACE = [ "$(SPACE_CHECK)" = no ] || $(BIN)/python tools/free_space.py

.PHONY: setup setup-demo demo test test-loaded lint bench bench-gpu plugin-template dist docs clean

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(FREE_SPACE) --need-gib 7.5 --what "the full set-up (torch with its CUDA libraries, dlib, ASR, docs)" $(VENV)
	$(PIP) install -q --upgrade pip
	@# torch first, pinned, so nothing later resolves a different build
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[test,dask,docs,seba]' -e 'plugins/face[torch,dlib]' -e plugins/gait -e 'plugins/voice[asr]' -e plugins/motion
	@# optional pretrained speaker encoder (weights inside the wheel); --no-deps: its webrtcvad pin needs a compiler
	$(PIP) install -q --no-deps 'resemblyzer>=0.1.4' 'webrtcvad-wheels>=2.0.14'
	@touch $(STAMP) $(LEAN_STAMP)

# the demo's set-up: the core and the four plugins without extras (every demo method runs without torch);
# nothing to do after the full set-up, which touches this stamp too
$(LEAN_STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# nothing to install where the full set-up is in place and current (a venv made before this stamp existed).
	@# Else: the build back-end once (below 81, as bioanon-face[dlib] needs), then no isolated build environment
	@# per distribution and no byte-compiling of every installed module (Python compiles what the demo
	@# imports): half the time of a plain install
	@if [ -f $(STAMP) ] && [ -z "$$(find $^ -newer $(STAMP))" ]; then :; else \
	  { $(FREE_SPACE) --need-gib 1 --what "the demo's set-up" $(VENV) || exit 1; }; \
	  echo "installing the core and the four plugins without their extras (no torch) into $(VENV)"; \
	  $(PIP) install -q --no-compile 'setuptools>=77,<81' && \
	  $(PIP) install -q --no-compile --no-build-isolation -e . $(addprefix -e ,$(PLUGINS)) || exit 1; fi
	@touch $(LEAN_STAMP)

setup: $(STAMP)

setup-demo: $(LEAN_STAMP)

demo: setup-demo
	$(BIN)/bioanon plugins
	$(BIN)/bioanon demo

plugin-template: setup
	$(PIP) install -q -e examples/plugin-template

test: setup plugin-template lint
	BIOANON_STRICT_PLUGINS=1 $(BIN)/python -m pytest tests examples/plugin-template/tests

# the suite in a random order (SEED) beside a CPU-bound busy process: what a loaded machine does to it
SEED ?= 1
test-loaded: setup plugin-template
	BIOANON_STRICT_PLUGINS=1 $(BIN)/python tools/busy.py --procs 1 -- \
	  $(BIN)/python -m pytest tests examples/plugin-template/tests --shuffle $(SEED)

# ruff (lint and format) and mypy (strict on the core, mypy's default checks on the plugins); part of `make test`
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/typecheck.py

bench: setup
	$(BIN)/python -m benchmarks.run

# CPU vs CUDA GPU of this machine, under "gpu" in benchmarks/results.json; says so and skips without a GPU
bench-gpu: setup
	$(BIN)/python -m benchmarks.gpu

# sdist + wheel of the core, the four plugins and the plugin template into dist/, checked by twine
DIST ?= dist
dist: setup
	rm -rf $(DIST) && mkdir -p $(DIST)
	for p in . $(PLUGINS) examples/plugin-template; do \
	  rm -rf $$p/build && $(BIN)/python -m build --no-isolation --outdir $(DIST) $$p > /dev/null || exit 1; \
	  rm -rf $$p/build; done
	$(BIN)/python -m twine check --strict $(DIST)/*
	@ls $(DIST)

# the documentation site (MkDocs) into site/, warnings as errors; the method catalogue and the figures are
# generated from the installed registry and a small evaluation
docs: setup plugin-template
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/python -m mkdocs build --strict --site-dir site
	@echo "docs: site/index.html"

clean:
	rm -rf site $(VENV) .pytest_cache .hypothesis dist build
