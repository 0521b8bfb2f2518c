"""Run belt commands in-process, as the console script would, and capture what they print."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from belt.cli import app


@dataclass
class Result:
    """What one belt invocation did."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout decoded as one JSON document."""
        return json.loads(self.stdout)


def belt(*args: str, input: str | None = None) -> Result:
    """Invoke ``belt ARGS...`` in-process."""
    result = CliRunner().invoke(app, list(args), input=input, prog_name="belt")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def belt_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`belt ARGS` as a process of its own, run in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "belt", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
