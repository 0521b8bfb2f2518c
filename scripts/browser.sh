#!/usr/bin/env bash
# The inspector's browser tests drive the system's Chromium, never a downloaded one. When it is
# missing and this is root on a Debian-like system, install the distribution's package (waiting
# for another install's dpkg lock rather than failing on it); then say truthfully whether the
# browser tests will run, and why not.
set -uo pipefail

if [ -n "${BELT_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
	echo "browser tests will run (chromium: ${BELT_CHROMIUM:-$(command -v chromium)})"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "browser tests will be skipped because chromium is not installed" \
		"(install the distribution's chromium package)"
	exit 0
fi

echo "installing chromium for the browser tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" >>"$log" 2>&1; }
if ! { apt update -qq && apt install -y -qq chromium; }; then
	echo "apt-get failed; its last lines:"
	tail -n 15 "$log" | sed 's/^/  /'
fi
if command -v chromium >/dev/null 2>&1; then
	echo "browser tests will run (chromium: $(command -v chromium))"
else
	echo "browser tests will be skipped because chromium could not be installed (see above)"
fi
