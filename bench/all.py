"""Every bench at its quick size, and one table of their verdicts: `make bench`.

Runs each bench of this folder (each script that reports ``Verdicts``; the others, such as
``serving.py``, are named on stderr as passed over) as ``python bench/NAME.py --quick`` (and
those ``ALSO`` names a second time, with its options: ``dispatch --otel``), one after the
other, with ``BELT_BENCH_TABLE`` naming a file of its own where its
``Verdicts.report()`` appends one JSON line per verdict. Then prints one table (bench, measure,
target, figure, verdict) under a line saying when and where (the date, the CPUs, the
Python, the load average), plain when piped, and exits 1 when a target was missed or a bench
crashed. A bench crashed when it exited with another code than 0 or 1, exited 1 with no target
missed, printed no verdict, or ran past ``--timeout``; its row says so, with the last line it
wrote. Each bench's output is kept in a log whose path its progress line names.

    .venv/bin/python bench/all.py [--only NAME...] [--dir DIR] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verdict import Verdict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLUMNS = ("bench", "measure", "target", "figure", "verdict")
ALSO = {"dispatch": ("--otel",)}
"""Benches run a second time, with these options (another set of targets)."""


def benches(folder: Path) -> dict[str, Path]:
    """The benches of ``folder`` by name: each script that reports ``Verdicts``, but this one."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.resolve() == Path(__file__).resolve() or 'if __name__ == "__main__":' not in text:
            continue
        if "Verdicts(" in text:
            found[path.stem] = path
        else:
            print(f"passed over {path}: it reports no Verdicts", file=sys.stderr)
    return found


def run(
    name: str, path: Path, logs: Path, timeout: float, options: tuple[str, ...] = ()
) -> list[list[str]]:
    """Run one bench at its quick size (with ``options``); its rows of the table, each named
    ``NAME OPTIONS``."""
    name = " ".join([name, *options])
    table, log = logs / f"{name.replace(' ', '')}.jsonl", logs / f"{name.replace(' ', '')}.log"
    env = {**os.environ, "BELT_BENCH_TABLE": str(table), "NO_COLOR": "1"}
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        try:
            code: int | None = subprocess.run(
                [sys.executable, str(path), "--quick", *options],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
    seconds = time.monotonic() - started
    lines = table.read_text(encoding="utf-8").splitlines() if table.exists() else []
    verdicts = [
        Verdict(**{k: v for k, v in json.loads(line).items() if k != "met"}) for line in lines
    ]
    print(
        f"{name}: {len(verdicts)} verdicts, exit {code}, {seconds:.0f} s (output: {log})",
        file=sys.stderr,
        flush=True,
    )
    rows = [
        [name, v.measure, v.target_text, v.figure_text, "met" if v.met else "MISSED"]
        for v in verdicts
    ]
    missed = any(not v.met for v in verdicts)
    why = (
        f"ran past {timeout:g} s"
        if code is None
        else f"exit {code}"
        if code not in (0, 1)
        else "exit 1 with no target missed"
        if code == 1 and not missed
        else "printed no verdict"
        if not verdicts
        else None
    )
    if why is not None:
        told = log.read_text(encoding="utf-8", errors="replace").splitlines()
        last = next((line.strip() for line in reversed(told) if line.strip()), "")
        rows.append([name, f"crashed: {why}", "", last[:120], "CRASHED"])
    return rows


def machine() -> str:
    """When and where: the date, the CPUs, the Python, the load."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(line for line in info if line.startswith("model name")).split(":")[1]
    except (OSError, StopIteration):
        model = platform.processor() or model
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs "
        f"({model.strip()}); Python {platform.python_version()}; load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these benches (default: all)")
    parser.add_argument("--dir", type=Path, default=HERE, help="where the benches are")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per bench")
    args = parser.parse_args()
    found = benches(args.dir)
    unknown = sorted(set(args.only or ()) - set(found))
    if unknown:
        parser.error(f"--only: no bench named {', '.join(unknown)} in {args.dir}")
    chosen = {name: found[name] for name in (args.only or found)}
    logs = Path(tempfile.mkdtemp(prefix="belt-bench-all-"))
    rows: list[list[str]] = []
    for name, path in chosen.items():
        rows.extend(run(name, path, logs, args.timeout))
        if name in ALSO:
            rows.extend(run(name, path, logs, args.timeout, ALSO[name]))
    sys.path.insert(0, str(ROOT))
    from belt.display.output import table

    print(f"\n{machine()}")
    table(COLUMNS, rows)
    failed = [row for row in rows if row[-1] != "met"]
    print(
        f"\n{len(rows) - len(failed)} of {len(rows)} met; "
        f"{sum(1 for row in rows if row[-1] == 'MISSED')} missed, "
        f"{sum(1 for row in rows if row[-1] == 'CRASHED')} benches crashed"
    )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
