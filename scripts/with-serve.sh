#!/usr/bin/env bash
# Run a command beside `belt serve` on 127.0.0.1:8787, the port the examples name.
#
#   scripts/with-serve.sh BIN LOG SERVE_ARGS... -- COMMAND...
#
# Fails at once, saying so, when the port is taken (the demo would otherwise talk to whatever
# answers there); stops the server when the command ends.
set -uo pipefail

bin=$1 log=$2
shift 2
serve=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do serve+=("$1"); shift; done
shift

if ! "$bin/python" -c "import socket; socket.create_server(('127.0.0.1', 8787)).close()" 2>/dev/null; then
	echo "error: port 8787 is in use (another belt serve, or another program): the examples' hooks" >&2
	echo "  call http://127.0.0.1:8787. Stop what listens there and run this again." >&2
	exit 1
fi
"$bin/belt" serve "${serve[@]}" --port 8787 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 100); do
	"$bin/python" -c "import urllib.request as r; r.urlopen('http://127.0.0.1:8787/healthz')" \
		2>/dev/null && break
	if ! kill -0 $pid 2>/dev/null; then
		echo "error: belt serve did not start; its log ($log):" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
"$@"
