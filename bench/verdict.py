"""Targets and verdicts, the same for every bench.

A bench measures figures, compares each against its target, prints one verdict line per target
and exits 1 when one is missed::

    verdicts = Verdicts("dispatch")
    verdicts.check("py: hook / webhook hook (CPU)", figure=0.07, target=0.1)
    verdicts.check("events per second, no hook", figure=5200, target=2000, higher_is_better=True)
    verdicts.report()          # prints the lines, exits 1 when a target was missed

Every bench takes ``--quick`` (its smallest size, for ``make bench`` and the tests) and the
test-only ``--handicap SECONDS`` (the bench slows its own subject by that much per operation, so
a test can see that a slower belt fails the verdict; belt itself has no such switch). When
``BELT_BENCH_TABLE`` names a file, ``report()`` appends one JSON line per verdict to it, which
``bench/all.py`` turns into one table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Verdict:
    bench: str
    measure: str
    figure: float
    target: float
    higher_is_better: bool
    unit: str

    @property
    def met(self) -> bool:
        return self.figure >= self.target if self.higher_is_better else self.figure <= self.target

    @property
    def target_text(self) -> str:
        return f"{'≥' if self.higher_is_better else '≤'} {_number(self.target)}{self.unit}"

    @property
    def figure_text(self) -> str:
        return f"{_number(self.figure)}{self.unit}"

    def line(self) -> str:
        word = "met" if self.met else "MISSED"
        return f"verdict: {word:<6} {self.measure}: {self.figure_text} (target {self.target_text})"


def _number(value: float) -> str:
    if value == int(value) and abs(value) >= 10:
        return f"{int(value)}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


class Verdicts:
    """The verdicts of one bench run."""

    def __init__(self, bench: str) -> None:
        self.bench = bench
        self.verdicts: list[Verdict] = []

    def check(
        self,
        measure: str,
        *,
        figure: float,
        target: float,
        higher_is_better: bool = False,
        unit: str = "",
    ) -> Verdict:
        verdict = Verdict(self.bench, measure, float(figure), float(target), higher_is_better, unit)
        self.verdicts.append(verdict)
        return verdict

    @property
    def missed(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if not verdict.met]

    def report(self) -> None:
        """Print every verdict, record them for ``bench/all.py``, and exit 1 on a miss."""
        print()
        for verdict in self.verdicts:
            print(verdict.line())
        table = os.environ.get("BELT_BENCH_TABLE")
        if table:
            with open(table, "a", encoding="utf-8") as out:
                for verdict in self.verdicts:
                    out.write(json.dumps({**asdict(verdict), "met": verdict.met}) + "\n")
        missed = self.missed
        print(
            f"{self.bench}: {len(self.verdicts) - len(missed)} of {len(self.verdicts)} targets met"
        )
        sys.stdout.flush()
        if missed:
            raise SystemExit(1)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """``--quick`` and the test-only ``--handicap``, the same in every bench."""
    parser.add_argument(
        "--quick", action="store_true", help="the smallest size (make bench, the tests)"
    )
    parser.add_argument(
        "--handicap",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="test only: slow the measured subject by this much per operation",
    )
