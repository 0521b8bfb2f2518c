"""The benches of bench/ can fail, and bench/all.py makes one table of them.

Each bench runs as a real subprocess at its quick size, made smaller still by its size options
(a test needs far less than ``make bench``), slowed by the test-only ``--handicap``: it must
print one well-formed verdict line per target, say MISSED for the measure the handicap weighs on,
record its verdicts as JSON lines in ``BELT_BENCH_TABLE`` and exit 1. They run at once, so the
file takes as long as the slowest. Whether an unhandicapped run meets its targets depends on the
machine, and is not asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VERDICT = re.compile(r"^verdict: (met   |MISSED) .+: \S+ \(target [≤≥] \S+\)$")

# Per bench: its options (smallest sizes, the handicap) and a measure the handicap makes fail.
HANDICAPPED = {
    "approvals": (
        ["--gates", "200", "--rounds", "1", "--opened", "5", "--handicap", "1"],
        "auto: a gate opened by another process settled, p95 of 5",
    ),
    "store": (
        ["--large", "150", "--samples", "3", "--handicap", "0.01"],
        "show at 150 / at 100",
    ),
    "scale": (
        ["--turns", "2", "4", "--calls", "2", "4", "--rounds", "1", "--handicap", "0.05"],
        "platform turns in memory, per turn at 4 / at 2 (cpu)",
    ),
    # One run each, so one floor run that waited for a core can hide a handicap: at 1 (each
    # command taking twice its own wall time) `belt version` read 1.06 against 1.3 beside a
    # loaded suite. At 4 the floor must take about four times belt's own run to hide it.
    "startup": (["--runs", "1", "--handicap", "4"], "belt version / import typer (wall)"),
    "emulator": (
        ["--chats", "1", "--messages", "1", "--rounds", "1", "--handicap", "1"],
        "messages with one webhook hook / with none (wall)",
    ),
    "serve": (
        [
            "--throughput",
            "--requests",
            "40",
            "--clients",
            "1",
            "--rounds",
            "1",
            "--handicap",
            "0.001",
        ],
        "server CPU per request, belt / bare app",
    ),
    "reliability": (
        ["--only", "load", "--load-seconds", "0.5", "--slow", "20", "--handicap", "3"],
        "throughput under 20 slowloris / quiet",
    ),
    "registry": (
        ["--large", "300", "--queries", "6", "--turns", "3", "--rounds", "1", "--handicap", "0.02"],
        "belt:suggest hook / no-hook event (CPU), 300 entries",
    ),
}


def run_bench(
    name: str, extra: list[str], folder: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    table = folder / f"{name}.jsonl"
    env = {**os.environ, "BELT_BENCH_TABLE": str(table), "BELT_HOME": str(folder / name)}
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return done, table


@pytest.fixture(scope="module")
def handicapped(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[subprocess.CompletedProcess[str], Path]]]:
    folder = tmp_path_factory.mktemp("benches")
    # scale's "on disk" states go to memory here when it can (quicker), never into bench/.
    shm = Path("/dev/shm")
    on_disk = {"scale": ["--dir", str(shm if shm.is_dir() and os.access(shm, os.W_OK) else folder)]}
    with ThreadPoolExecutor(len(HANDICAPPED)) as pool:
        futures = {
            name: pool.submit(run_bench, name, extra + on_disk.get(name, []), folder)
            for name, (extra, _) in HANDICAPPED.items()
        }
        yield {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", sorted(HANDICAPPED))
def test_a_handicapped_bench_misses_a_target_and_exits_1(
    name: str, handicapped: dict[str, tuple[subprocess.CompletedProcess[str], Path]]
) -> None:
    done, table = handicapped[name]
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("verdict: ")]
    assert lines, done.stdout
    assert all(VERDICT.match(line) for line in lines), lines
    missed = f"verdict: MISSED {HANDICAPPED[name][1]}: "
    assert any(line.startswith(missed) for line in lines), lines
    summary = f"{name}: {sum('verdict: met' in line for line in lines)} of {len(lines)} targets met"
    assert summary in done.stdout
    recorded = [json.loads(line) for line in table.read_text().splitlines()]
    assert [r["bench"] for r in recorded] == [name] * len(lines)
    assert [r["met"] for r in recorded] == ["verdict: met" in line for line in lines]


def test_every_bench_is_run_handicapped_by_a_test() -> None:
    """Every bench of bench/ as bench/all.py finds them (a script reporting Verdicts): here, or
    in tests/test_bench.py (check, dispatch, testsuite)."""
    scripts = {path: path.read_text(encoding="utf-8") for path in BENCH.glob("*.py")}
    found = {
        path.stem
        for path, text in scripts.items()
        if path.name != "all.py" and "Verdicts(" in text and '__name__ == "__main__"' in text
    }
    assert found == {*HANDICAPPED, "check", "dispatch", "testsuite"}


def write_benches(folder: Path) -> None:
    """Benches of a test's own: one that meets its target, one that misses, one that crashes,
    one that prints no verdict, a helper that is not a bench, and a script that reports no
    verdicts (not a bench either)."""
    head = f"import sys\nsys.path.insert(0, {str(BENCH)!r})\nfrom verdict import Verdicts\n"
    report = (
        "v = Verdicts({name!r})\n"
        "v.check('cost', figure={figure}, target=2, unit=' ms')\n"
        "v.report()\n"
    )
    main = 'if __name__ == "__main__":\n'
    for name, figure in (("fine", 1.5), ("slow", 3)):
        body = report.format(name=name, figure=figure)
        (folder / f"{name}.py").write_text(head + main + "    " + body.replace("\n", "\n    "))
    (folder / "broken.py").write_text(
        head + main + "    Verdicts('broken')\n    raise ValueError('no such store')\n"
    )
    (folder / "silent.py").write_text(head + main + "    Verdicts('silent')\n    print('done')\n")
    (folder / "helper.py").write_text("raise SystemExit('a helper is never run')\n")
    (folder / "server.py").write_text(main + "    import time\n    time.sleep(600)\n")


def run_all(folder: Path, *names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "all.py"), "--dir", str(folder), "--only", *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows(output: str) -> list[list[str]]:
    """The table's rows, cut at two spaces or more."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.splitlines() if line.strip()]


def test_all_builds_one_table_from_the_benches_json_lines(tmp_path: Path) -> None:
    write_benches(tmp_path)
    done = run_all(tmp_path, "fine", "slow")
    assert done.returncode == 1, done.stderr
    table = rows(done.stdout)
    assert ["bench", "measure", "target", "figure", "verdict"] in table
    assert ["fine", "cost", "≤ 2 ms", "1.5 ms", "met"] in table
    assert ["slow", "cost", "≤ 2 ms", "3 ms", "MISSED"] in table
    assert "1 of 2 met; 1 missed, 0 benches crashed" in done.stdout


def test_all_reports_a_crashed_bench_as_a_row_and_exits_1(tmp_path: Path) -> None:
    write_benches(tmp_path)
    done = run_all(tmp_path, "fine", "broken", "silent")
    assert done.returncode == 1, done.stderr
    table = rows(done.stdout)
    assert ["fine", "cost", "≤ 2 ms", "1.5 ms", "met"] in table
    assert [
        "broken",
        "crashed: exit 1 with no target missed",
        "ValueError: no such store",
        "CRASHED",
    ] in table
    assert ["silent", "crashed: printed no verdict", "done", "CRASHED"] in table
    assert "1 of 3 met; 0 missed, 2 benches crashed" in done.stdout


def test_all_exits_0_when_every_target_is_met(tmp_path: Path) -> None:
    write_benches(tmp_path)
    done = run_all(tmp_path, "fine")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 met; 0 missed, 0 benches crashed" in done.stdout


def test_all_refuses_a_bench_it_does_not_have(tmp_path: Path) -> None:
    write_benches(tmp_path)
    done = run_all(tmp_path, "fine", "helper", "server")
    assert done.returncode == 2
    assert f"--only: no bench named helper, server in {tmp_path}" in done.stderr
    assert f"passed over {tmp_path / 'server.py'}: it reports no Verdicts" in done.stderr
