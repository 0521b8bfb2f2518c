PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench docs completions clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/belt hooks events
	$(BIN)/belt hooks validate examples/hooks.json examples/hooks.toml examples/nexus-profile.json

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check belt tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/startup.py

docs: $(STAMP)
	$(BIN)/python -m belt.cli.docgen > docs/cli.md

completions: $(STAMP)
	for sh in bash zsh fish; do $(BIN)/belt completion $$sh > completions/belt.$$sh; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
