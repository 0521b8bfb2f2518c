PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install: belt alone (demo) and belt with its test tools (test).
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DECLARATIONS := examples/hooks.json examples/hooks.toml examples/nexus-profile.json \
	examples/nexus-hooks.toml

.PHONY: demo demo-sdk test browser lint typecheck bench docs completions clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(TEST_STAMP)

# The demo serves examples/policy.toml with `belt serve` (its log goes to .venv/demo-serve.log)
# and runs the guarded agent against it: a denied delete_file, an allowed one held at a gate,
# and the policy's reminder injected before each turn. It ends by suggesting the next command.
demo: $(STAMP)
	$(BIN)/belt hooks validate $(DECLARATIONS)
	@$(BIN)/belt serve --policy examples/policy.toml --port 8787 > $(VENV)/demo-serve.log 2>&1 & \
	pid=$$!; trap 'kill $$pid 2>/dev/null' EXIT; \
	for i in $$(seq 100); do \
		$(BIN)/python -c "import urllib.request as r; r.urlopen('http://127.0.0.1:8787/healthz')" \
			2>/dev/null && break; \
		kill -0 $$pid 2>/dev/null || { cat $(VENV)/demo-serve.log; exit 1; }; sleep 0.1; \
	done; \
	$(BIN)/belt sim run examples/guarded-agent.toml
	@echo
	@echo "next: review the gate that holds the run (allow or deny it), and let the run go on:"
	@echo "  $(BIN)/belt interrupt review --resume"

# The SDK demo runs examples/sdk_app.py, written only against the official Python SDK (installed
# with the test tools), against `belt serve`: it plays the platform with the model script
# examples/model.toml and is the app's webhook handler too (examples/policy.toml).
demo-sdk: $(TEST_STAMP)
	@$(BIN)/belt serve --policy examples/policy.toml --model examples/model.toml --port 8787 \
		> $(VENV)/demo-sdk-serve.log 2>&1 & \
	pid=$$!; trap 'kill $$pid 2>/dev/null' EXIT; \
	for i in $$(seq 100); do \
		$(BIN)/python -c "import urllib.request as r; r.urlopen('http://127.0.0.1:8787/healthz')" \
			2>/dev/null && break; \
		kill -0 $$pid 2>/dev/null || { cat $(VENV)/demo-sdk-serve.log; exit 1; }; sleep 0.1; \
	done; \
	INFERENCE_BASE_URL=http://127.0.0.1:8787 $(BIN)/python examples/sdk_app.py

# The inspector's browser tests drive the system's Chromium (never a downloaded one): install it
# from the distribution's packages when it is missing and this is root on a Debian-like system;
# elsewhere those tests are skipped, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium for the browser tests"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
				>/dev/null 2>&1 || echo "chromium could not be installed: browser tests will be skipped"; \
		else \
			echo "no chromium (install the chromium package): browser tests will be skipped"; \
		fi; }

# Two workers: the suite spends most of its time waiting on the processes and servers it starts.
test: $(TEST_STAMP) browser
	$(BIN)/python -m pytest -q -n 2
	$(BIN)/belt test examples/tests
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
