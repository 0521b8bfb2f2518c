"""Racing belt processes: one process imports belt and forks a racer per command, and all the
racers start their command together.

Each racer is a process of its own (its own pid, descriptors and locks) running belt's
``__main__`` as ``python -m belt`` would; forked from one that imported belt already, the start-up
is paid once rather than once per racer, and the racers really overlap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence

RACER = """
import json
import os
import runpy
import sys
import tempfile
import traceback

from belt.cli.root import LAZY


def run(command, go, out, err):
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.read(go, 1)
    sys.argv = ["belt", *command]
    code = 0
    try:
        runpy.run_module("belt", run_name="__main__", alter_sys=True)
    except SystemExit as exit:  # as the interpreter turns it into an exit status
        if isinstance(exit.code, int) or exit.code is None:
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


commands, preload = json.loads(sys.argv[1]), json.loads(sys.argv[2])
# Start-up (the app, each named command's module, what the caller names) done before the racers
# fork, so that it is paid once and the racers really overlap.
for command in commands:
    target = LAZY["belt"].get(command[0] if command else "")
    if target is not None:
        preload.append(target.partition(":")[0])
for module in preload:
    __import__(module)
go, start = os.pipe()
folder = tempfile.mkdtemp()
racers = []
for i, command in enumerate(commands):
    paths = [os.path.join(folder, f"{i}.{stream}") for stream in ("out", "err")]
    out, err = [os.open(path, os.O_WRONLY | os.O_CREAT, 0o600) for path in paths]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(start)
        run(command, go, out, err)
    os.close(out)
    os.close(err)
    racers.append((pid, paths))
print("ready", flush=True)
sys.stdin.readline()
os.write(start, b"x" * len(racers))
finished = []
for pid, paths in racers:
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    texts = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as file:
            texts.append(file.read())
        os.unlink(path)
    finished.append([code, *texts])
os.rmdir(folder)
print(json.dumps(finished), flush=True)
"""


def race(
    commands: Sequence[Sequence[str]],
    env: Mapping[str, str],
    timeout: float = 60,
    preload: Sequence[str] = (),
) -> list[tuple[int, str, str]]:
    """Run ``belt COMMAND`` for each command at once; (exit code, stdout, stderr) of each. The
    modules ``preload`` names are imported before the racers start, so none pays for them."""
    forker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RACER,
            json.dumps([list(c) for c in commands]),
            json.dumps(list(preload)),
        ],
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert forker.stdout is not None and forker.stdout.readline() == "ready\n"
    out, err = forker.communicate("go\n", timeout=timeout)
    assert forker.returncode == 0, err
    return [(code, stdout, stderr) for code, stdout, stderr in json.loads(out)]
