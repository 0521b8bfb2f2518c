#!/usr/bin/env bash
# `make test`: every check runs, whatever failed before it, and each says how it went in one
# line at the end; the exit status is non-zero when any of them failed.
#
#   scripts/test.sh BIN    (BIN: the virtual environment's bin directory)
set -uo pipefail

bin=${1:?usage: scripts/test.sh BIN}
summary=()
failed=0

step() {
	local name=$1
	shift
	local start=$SECONDS status
	echo "--- $name: $*"
	"$@"
	status=$?
	local took=$((SECONDS - start))
	if [ "$status" -eq 0 ]; then
		summary+=("  passed  $name (${took} s)")
	else
		summary+=("  FAILED  $name (exit $status, ${took} s)")
		failed=$((failed + 1))
	fi
}

# Two workers: the suite spends most of its time waiting on the processes and servers it starts.
step pytest "$bin/python" -m pytest -q -n 2
step "belt test examples/tests" "$bin/belt" test examples/tests
step "ruff format --check" "$bin/ruff" format --check belt tests bench
step "ruff check" "$bin/ruff" check belt tests bench
step mypy "$bin/mypy"

echo
echo "make test:"
printf '%s\n' "${summary[@]}"
total=${#summary[@]}
echo "steps: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
