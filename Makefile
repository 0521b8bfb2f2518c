PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install: belt alone (demo) and belt with its test tools (test).
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DECLARATIONS := examples/hooks.json examples/hooks.toml examples/nexus-profile.json \
	examples/nexus-hooks.toml

.PHONY: demo test lint typecheck bench docs completions clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(TEST_STAMP)

demo: $(STAMP)
	$(BIN)/belt hooks events
	$(BIN)/belt hooks validate $(DECLARATIONS)

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check belt tests bench
	$(BIN)/mypy

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check belt tests bench
	$(BIN)/ruff check belt tests bench

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/startup.py

# Regenerate what is generated from the command tree: `make docs completions`.
docs: $(STAMP)
	$(BIN)/python -m belt.cli.docgen > docs/cli.md

completions: $(STAMP)
	for sh in bash zsh fish; do $(BIN)/belt completion $$sh > completions/belt.$$sh; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
