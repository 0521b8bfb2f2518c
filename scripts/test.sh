#!/usr/bin/env bash
# `make test`: every check runs, whatever failed before it, and each says how it went in one
# line at the end; the exit status is non-zero when any of them failed.
#
#   scripts/test.sh BIN    (BIN: the virtual environment's bin directory)
set -uo pipefail

bin=${1:?usage: scripts/test.sh BIN}
summary=()
failed=0

# Python keeps its bytecode caches (__pycache__, which git ignores) for these runs, even where
# PYTHONDONTWRITEBYTECODE is set, as in many containers: without them each of pytest's workers
# compiles every test module again (and rewrites its asserts), and each belt process a test
# starts compiles belt again.
unset PYTHONDONTWRITEBYTECODE

step() {
	local name=$1
	shift
	local start=$SECONDS status
	echo "--- $name: $*"
	"$@"
	status=$?
	tally "$name" "$status" $((SECONDS - start))
}

tally() {
	local name=$1 status=$2 took=$3
	if [ "$status" -eq 0 ]; then
		summary+=("  passed  $name (${took} s)")
	else
		summary+=("  FAILED  $name (exit $status, ${took} s)")
		failed=$((failed + 1))
	fi
}

# The tests of what belt takes from its dependencies, run again against the newest release of
# each (the only list of them; README's test command section says why these): Typer and Click
# (help, completion), uvicorn and Starlette (the slow-client defence, the guard's limits), httpx
# (the transport) and Hypothesis (a seed's cases and reproducer in belt check). The whole suite
# runs on constraints.txt's versions; these few keep the newest step within seconds.
NEWEST_TESTS=(
	tests/cli/test_help.py
	tests/cli/test_completion.py
	tests/test_server_limits.py
	tests/test_server_connections.py
	tests/test_transport.py
	tests/test_check.py::test_the_same_seed_gives_the_same_failure
	tests/test_check.py::test_the_command_exits_1_on_a_failure_and_prints_the_reproducer
)

# A venv of its own (.venv-newest, kept between runs) with belt and the newest release of every
# dependency and of the test runner, upgraded each run, constraints.txt left out; an install that
# fails (the index unreachable included) fails the step. Its tests run in one process: they are
# few, and a worker each would only collect them again.
newest() {
	local venv=.venv-newest
	if [ ! -x "$venv/bin/python" ]; then
		"${PYTHON:-python3}" -m venv "$venv" || return
	fi
	"$venv/bin/python" -m pip install --quiet --quiet --disable-pip-version-check \
		--upgrade --upgrade-strategy eager -e . pytest || return
	"$venv/bin/python" -m pytest -q "${NEWEST_TESTS[@]}"
}

# A step run beside the others, from the start: its output is kept and printed after the others',
# in its place (`collect NAME`), with its line of the summary.
beside() {
	local name=$1
	shift
	local dir
	dir=$(mktemp -d)
	(
		start=$SECONDS
		"$@"
		status=$?
		echo $((SECONDS - start)) >"$dir/took"
		exit $status
	) >"$dir/log" 2>&1 &
	besides[$name]="$! $dir"
}

collect() {
	local name=$1 pid dir status
	read -r pid dir <<<"${besides[$name]}"
	echo "--- $name (run beside the steps above)"
	wait "$pid"
	status=$?
	cat "$dir/log"
	tally "$name" "$status" "$(cat "$dir/took" 2>/dev/null || echo ?)"
	rm -rf "$dir"
}

declare -A besides
# The newest step: its install waits on the index and its tests mostly on their deadlines (about
# 8 s of CPU in 20 s), so on its own at the end it added 25-30 s to the run. mypy (about 10 s of
# CPU, its cache empty in a fresh clone) takes what pytest's four workers leave of the two cores
# while they wait on the processes and servers of their tests, and at the end, when the last
# tests run alone.
beside "pytest, newest dependencies" newest
beside mypy "$bin/mypy"

# Four workers on a two-core machine: each worker spends much of its time waiting on the
# processes and servers its tests start, so more workers than cores keep both busy (pytest took
# 244 s with two workers, 191 s with three and 173 s with four, on a quiet two-core machine).
# The 20 slowest tests are listed at the end of its output (docs/performance.md#the-test-suite).
step pytest "$bin/python" -m pytest -q -n 4 --durations=20
step "belt test examples/tests" "$bin/belt" test examples/tests
step "ruff format --check" "$bin/ruff" format --check belt tests bench
step "ruff check" "$bin/ruff" check belt tests bench
collect mypy
collect "pytest, newest dependencies"

echo
echo "make test:"
printf '%s\n' "${summary[@]}"
total=${#summary[@]}
echo "steps: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
