#!/bin/sh
# An executor tool that acknowledges every Nexus lifecycle hook task it is given.
cat >/dev/null
echo '{"structured_content": {"continue": false}}'
