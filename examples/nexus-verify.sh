#!/bin/sh
# An executor tool for Nexus lifecycle hooks: the hook task input arrives as JSON on stdin and
# the result goes to stdout as JSON. It acknowledges every boundary but stop, where it asks for
# another model round until the answer says the tests pass.
#   belt sim run examples/nexus-stop-loop.toml --executor verify=cmd:examples/nexus-verify.sh
input=$(cat)
case "$input" in
  *'"event": "stop"'*)
    case "$input" in
      *"tests pass"*) ;;
      *)
        echo '{"structured_content": {"continue": true, "feedback": "Run the tests and report whether they pass."}}'
        exit 0
        ;;
    esac
    ;;
esac
echo '{"structured_content": {"continue": false}}'
