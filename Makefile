PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install: belt alone (demo), belt with the official SDK (demo-sdk), belt with its
# test tools (test, which include the SDK). Each installs the versions in constraints.txt, within
# pyproject.toml's open ranges, so every run tests the same code; `make test`'s last step tries
# the newest releases in a venv of its own (scripts/test.sh).
STAMP := $(VENV)/.installed
SDK_STAMP := $(VENV)/.installed-sdk
TEST_STAMP := $(VENV)/.installed-test
DECLARATIONS := examples/hooks.json examples/hooks.toml examples/nexus-profile.json \
	examples/nexus-hooks.toml

PIN := -c constraints.txt

.PHONY: demo demo-sdk test browser lint typecheck bench docs completions clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(PIN) -e .
	touch $(STAMP)

$(SDK_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(PIN) -e '.[sdk]'
	touch $(STAMP) $(SDK_STAMP)

$(TEST_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(PIN) -e '.[test]'
	touch $(STAMP) $(SDK_STAMP) $(TEST_STAMP)

# The demos keep their state in homes of their own under .venv (BELT_HOME), never in the user's
# store or registry; each run starts from an empty one. `make clean` removes them with .venv.
DEMO_HOME := $(VENV)/demo-home
DEMO_SDK_HOME := $(VENV)/demo-sdk-home

# The demo serves examples/policy.toml with `belt serve` on port 8787 (its log goes to
# .venv/demo-serve.log) and runs the guarded agent against it: a denied delete_file, an allowed
# one held at a gate, and the policy's reminder injected before each turn. It fails at once when
# the port is taken, and ends by suggesting the next command, with BELT_HOME set to the demo's
# home so that it finds the demo's gate.
demo: $(STAMP)
	$(BIN)/belt hooks validate $(DECLARATIONS)
	@rm -rf $(DEMO_HOME)
	@BELT_HOME=$(DEMO_HOME) scripts/with-serve.sh $(BIN) $(VENV)/demo-serve.log \
		--policy examples/policy.toml -- $(BIN)/belt sim run examples/guarded-agent.toml
	@echo
	@echo "next: review the gate that holds the run (allow or deny it), and let the run go on;"
	@echo "the demo's state is in $(DEMO_HOME), not in yours, so say so to belt:"
	@echo "  BELT_HOME=$(DEMO_HOME) $(BIN)/belt interrupt review --resume"
	@echo "(or export BELT_HOME=$(DEMO_HOME) and . $(BIN)/activate first: then belt … finds the"
	@echo "demo's run, the commands above included; unset BELT_HOME to go back to your own state)"

# The SDK demo runs examples/sdk_app.py, written only against the official Python SDK (the `sdk`
# extra), against `belt serve`: it plays the platform with the model script examples/model.toml
# and is the app's webhook handler too (examples/policy.toml).
demo-sdk: $(SDK_STAMP)
	@rm -rf $(DEMO_SDK_HOME)
	@BELT_HOME=$(DEMO_SDK_HOME) INFERENCE_BASE_URL=http://127.0.0.1:8787 scripts/with-serve.sh \
		$(BIN) $(VENV)/demo-sdk-serve.log --policy examples/policy.toml --model examples/model.toml \
		-- $(BIN)/python examples/sdk_app.py

# The inspector's browser tests drive the system's Chromium (never a downloaded one): installed
# from the distribution's packages when it is missing and this is root on a Debian-like system;
# elsewhere those tests are skipped, saying why.
browser:
	@scripts/browser.sh

# Every check runs even when one before it failed, and each ends with a line of the summary.
test: $(TEST_STAMP) browser
	@PYTHON=$(PYTHON) scripts/test.sh $(BIN)

# constraints.txt anew: .venv upgraded to the newest release of every dependency, its versions
# written under the file's own comment. Run `make test` before committing it.
lock: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	{ grep '^#' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt
	touch $(STAMP) $(SDK_STAMP) $(TEST_STAMP)

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check belt tests bench
	$(BIN)/ruff check belt tests bench

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# Every bench of bench/ at its quick size, one table of verdicts; exit 1 when a target is missed
# or a bench crashed (docs/performance.md). The benches use the test tools (the SDK, Hypothesis).
bench: $(TEST_STAMP)
	$(BIN)/python bench/all.py

# Regenerate what is generated from the command tree: `make docs completions`.
docs: $(STAMP)
	$(BIN)/python -m belt.cli.docgen > docs/cli.md

completions: $(STAMP)
	for sh in bash zsh fish; do $(BIN)/belt completion $$sh > completions/belt.$$sh; done

clean:
	rm -rf $(VENV) .venv-newest .mypy_cache .pytest_cache .ruff_cache
