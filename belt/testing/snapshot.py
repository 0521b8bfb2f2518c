"""Snapshots: a scenario's whole record as stable JSON in ``__snapshots__/FILE.json`` beside it.

What differs between two runs is taken out first: ids become names numbered by kind (``<run:1>``),
durations go, timestamps stay only on a virtual clock; sorted keys make a change a small diff.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import chain, groupby, zip_longest
from pathlib import Path
from typing import Any, cast

from belt.errors import BeltError
from belt.reading import strictjson
from belt.reading.inputs import read_bytes
from belt.store.files import atomic_write

DIRECTORY = "__snapshots__"  # beside a scenario: __snapshots__/FILE.json
DURATIONS = frozenset({"duration_ms", "latency_ms"})  # measured times, left out
# What of a hook task's claim names the worker process that ran it; its mark stays.
CLAIMANT = ("by", "host", "pid", "started")
# The name of each id prefix (others keep their prefix: ``<rp:1>``).
KINDS = {"ag": "agent", "ar": "run", "call": "call", "ch": "chat", "ht": "task", "int": "int"}
KINDS |= {"msg": "msg", "sim": "sim", "ti": "tool"}
# A record id: a prefix and 20 letters and digits, or up to 32 for derived ones (``ht_``).
ID = re.compile(r"(?<![0-9A-Za-z_])([a-z]{1,8})_([0-9a-z]{20,32})(?![0-9A-Za-z_])")
# A short form of an id: its body's first letters, with or without its prefix.
SHORT = re.compile(r"(?<![0-9A-Za-z_])(?:([a-z]{1,8})_)?([0-9a-z]{6,19})(?![0-9A-Za-z_])")
SHORT_MIN = 6
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?", re.IGNORECASE
)
WALL_TIME = "<time>"
# The parts of a record in the order a snapshot lists them and names their changes.
FIRST = ("clock", "simulation", "hook_executions", "hook_tasks", "interrupts", "runs", "chat")
# What a failure shows: lines of diff, characters of a line (a longer one is cut AROUND its
# first change), changed values named before the diff.
DIFF_LINES, LINE_CHARS, AROUND, CHANGES_SHOWN = 200, 200, 60, 8


def snapshot_path(scenario: Path) -> Path:
    """Where the snapshot of ``scenario`` is kept: ``__snapshots__/NAME.json`` beside it."""
    return scenario.parent / DIRECTORY / f"{scenario.name}.json"


class _Names:
    """Stable names for the ids of one record, given in the order they first appear."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.short: dict[str, str] = {}

    def learn(self, value: Any) -> None:
        """Name every id in ``value`` (walked in its own order) that has no name yet."""
        if isinstance(value, dict | list):
            for item in chain.from_iterable(value.items()) if isinstance(value, dict) else value:
                self.learn(item)
        elif isinstance(value, str):
            for match in ID.finditer(value):
                self._name(match.group(1), match.group(2))

    def _name(self, prefix: str, body: str) -> None:
        full = f"{prefix}_{body}"
        if full in self.names:
            return
        kind = KINDS.get(prefix, prefix)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        name = f"<{kind}:{self.counts[kind]}>"
        self.names[full] = name
        for length in range(SHORT_MIN, len(body)):
            self.short.setdefault(body[:length], name)

    def text(self, text: str, *, wall: bool) -> str:
        """``text`` with every id (full or short) as its name, and on wall time, no times."""
        text = ID.sub(lambda m: self.names.get(m.group(), m.group()), text)
        if self.short:
            text = SHORT.sub(self._short, text)
        if wall:
            text = TIMESTAMP.sub(WALL_TIME, text)
        return text

    def _short(self, match: re.Match[str]) -> str:
        name, prefix = self.short.get(match.group(2)), match.group(1)
        if name is None or (prefix and KINDS.get(prefix, prefix) not in name):
            return match.group()  # no id seen starts so, or one of another kind: left as it is
        return name

    def value(self, value: Any, *, wall: bool) -> Any:
        """``value`` with ids named, durations left out and (on wall time) no times."""
        if isinstance(value, dict):
            return {
                self.text(str(key), wall=wall): self.value(item, wall=wall)
                for key, item in value.items()
                if key not in DURATIONS
            }
        if isinstance(value, list):
            return [self.value(item, wall=wall) for item in value]
        if isinstance(value, str):
            return self.text(value, wall=wall)
        return value


def snapshot_of(report: Mapping[str, object], *, virtual_clock: bool) -> dict[str, object]:
    """The stable form of a report: ids named in order, no durations or hook summary, timestamps
    only on a virtual clock."""
    record = {key: value for key, value in report.items() if key != "hook_summary"}
    if isinstance(simulation := record.get("simulation"), dict):  # not its scenario's full path
        record["simulation"] = {k: v for k, v in simulation.items() if k != "source"}
    # Async hooks finish in their own time, so their records interleave with the others in
    # no fixed order: they are named after the rest and listed last, in the order of their
    # stable form.
    if isinstance(tasks := record.get("hook_tasks"), list):
        record["hook_tasks"] = [_unclaimed(task) for task in tasks]
    executions = cast(list[dict[str, object]], record.get("hook_executions") or [])
    late = [execution for execution in executions if execution.get("async")]
    record["hook_executions"] = [each for each in executions if not each.get("async")]
    names = _Names()
    names.learn([record, late])
    wall = not virtual_clock
    stable = names.value(record, wall=wall)
    if "hook_tasks" in record:  # a Nexus hook task waits for a real executor: on wall time
        stable["hook_tasks"] = names.value(record["hook_tasks"], wall=True)
    stable["hook_executions"] += sorted(
        names.value(late, wall=wall), key=lambda item: json.dumps(item, sort_keys=True)
    )
    return {"clock": "virtual" if virtual_clock else "wall", **stable}


def _unclaimed(task: Any) -> Any:
    """A hook task without the process its claim names (``CLAIMANT``)."""
    claim = task.get("claim") if isinstance(task, dict) else None
    if not isinstance(claim, dict):
        return task
    return {**task, "claim": {k: v for k, v in claim.items() if k not in CLAIMANT}}


def snapshot_text(report: Mapping[str, object], *, virtual_clock: bool) -> str:
    """The snapshot of a report as it is stored: parts in order, keys sorted, indented."""
    document = snapshot_of(report, virtual_clock=virtual_clock)
    # Every key below the parts sorted: json's encoder sorts them faster than a walk would.
    parts = sorted(document, key=_part_order)
    ordered = {part: json.loads(json.dumps(document[part], sort_keys=True)) for part in parts}
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


def _part_order(key: str) -> tuple[int, str]:
    """The record's parts in the order of ``FIRST``, then the rest."""
    return (FIRST.index(key) if key in FIRST else len(FIRST), key)


@dataclass
class Comparison:
    """How a record compared with its stored snapshot; ``diff`` is the stored one's against it."""

    path: str
    status: str  # same, written, changed or missing
    changes: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """True when the record does not match its snapshot (or there is none)."""
        return self.status in ("changed", "missing")

    def to_json(self) -> dict[str, object]:
        """The comparison as ``belt test --json`` prints it."""
        return asdict(self)


def compare(path: Path, text: str, *, update: bool) -> Comparison:
    """Compare a snapshot ``text`` with the one stored at ``path`` (``update``: write it if not)."""
    stored = None
    if path.exists():
        stored = read_bytes(path, kind="snapshot").decode("utf-8", "backslashreplace")
    if stored == text:
        return Comparison(str(path), "same")
    if update:
        _write(path, text)
        return Comparison(str(path), "written")
    if stored is None:
        return Comparison(str(path), "missing")
    return Comparison(str(path), "changed", changes(stored, text), unified(stored, text, path))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BeltError(f"{path.parent}: cannot create it: {exc.strerror or exc}") from None
    atomic_write(path, text.encode("utf-8"))
    try:
        path.chmod(0o644)  # a file to review and commit, not a private record
    except OSError as exc:
        raise BeltError(f"{path}: cannot make it readable: {exc.strerror or exc}") from None


def unified(stored: str, text: str, path: Path) -> list[str]:
    """The unified diff of the stored snapshot against this run's, cut at ``DIFF_LINES``."""
    old, new = f"{path} (stored)", f"{path} (this run)"
    lines = [*difflib.unified_diff(stored.splitlines(), text.splitlines(), old, new, lineterm="")]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… and {len(lines) - DIFF_LINES} more line(s) of diff"]
    return cut_long_lines(lines)


def cut_long_lines(lines: list[str]) -> list[str]:
    """A unified diff's lines, a changed pair longer than ``LINE_CHARS`` cut where they differ."""
    kind = lambda line: "" if line.startswith(("--- ", "+++ ")) else line[:1]  # noqa: E731
    runs = [(sign, list(run)) for sign, run in groupby(lines, kind)]
    shown: list[str] = []
    for index, (sign, run) in enumerate(runs):
        other: list[str] = []
        if sign == "-" and index + 1 < len(runs) and runs[index + 1][0] == "+":
            other = runs[index + 1][1]
        elif sign == "+" and index and runs[index - 1][0] == "-":
            other = runs[index - 1][1]
        for line, pair in zip_longest(run, other[: len(run)]):
            column = None if pair is None else len(os.path.commonprefix([line[1:], pair[1:]]))
            shown.append(_shown(line, column))
    return shown


def _shown(line: str, column: int | None) -> str:
    """A diff line, cut to ``AROUND`` characters each side of ``column`` when it is too long."""
    sign, text = line[:1], line[1:]
    if len(text) <= LINE_CHARS:
        return line
    start = max(0, (column or 0) - AROUND)
    end = min(len(text), start + 2 * AROUND)
    where = f"cut: columns {start + 1}-{end} of {len(text)}"
    if column is not None:
        where += f", first difference at column {column + 1}"
    cut = f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"
    return f"{sign}{cut}  [{where}]"


def changes(stored: str, text: str) -> list[str]:
    """The values that differ, by path and what they are about (``x[1] (agent.error) a: 1 → 2``)."""
    try:
        old = strictjson.decode(stored)
    except strictjson.StrictJSONError:
        return ["the stored snapshot is not valid JSON"]
    new = json.loads(text)
    found: list[str] = []
    if isinstance(old, dict) and isinstance(new, dict):
        # The hook calls first: a changed decision is named before the rows it changed.
        # What the hooks decided is named before the simulation's status it changed.
        for key in sorted(set(old) | set(new), key=lambda k: (k in FIRST[:2], _part_order(k))):
            was, now = ({k: v for k, v in part.items() if k == key} for part in (old, new))
            _walk_changes(was, now, "", found)
    else:
        _walk_changes(old, new, "", found)
    if len(found) > CHANGES_SHOWN:
        found = [*found[:CHANGES_SHOWN], f"… and {len(found) - CHANGES_SHOWN} more change(s)"]
    return found


CHANGES_KEPT = 1000


def _walk_changes(old: Any, new: Any, path: str, found: list[str]) -> None:
    """Name each value that differs by its path, a list item with what it is about (``_label``)."""
    if len(found) >= CHANGES_KEPT:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}" if path else key
            if key not in new:
                found.append(f"{where}: removed (was {_short(old[key])})")
            elif key not in old:
                found.append(f"{where}: added ({_short(new[key])})")
            else:
                _walk_changes(old[key], new[key], where, found)
        return
    if isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            item = new[index] if index < len(new) else old[index]
            where = f"{path}[{index}]{_label(item)}"
            if index < min(len(old), len(new)) and _label(old[index]) != _label(item):
                # Not the same kind of item any more: say what it was and what it is.
                was, now = _label(old[index])[2:-1] or "?", _label(item)[2:-1] or "?"
                found.append(f"{path}[{index}]: was {was}, is {now}")
                continue
            if index >= len(new):
                found.append(f"{where}: removed")
            elif index >= len(old):
                found.append(f"{where}: added")
            else:
                _walk_changes(old[index], new[index], where, found)
        return
    if old != new:
        found.append(f"{path}: {_short(old)} → {_short(new)}")


def _label(item: Any) -> str:
    """What a list item of the record is about: its event and tool, its role, or its source."""
    if not isinstance(item, dict):
        return ""
    blocks = item.get("content")
    block = blocks[0] if isinstance(blocks, list) and blocks else None
    hook = ((block.get("event") or {}).get("hook") if isinstance(block, dict) else None) or {}
    if isinstance(hook, dict) and hook.get("event"):
        return f" (hook row {hook['event']})"
    event = item.get("hook_event") or item.get("event") or item.get("source")
    role = item.get("role")
    payload = item.get("payload") or item.get("meta")
    data = payload.get("data") if isinstance(payload, dict) else None
    tool = data.get("tool") if isinstance(data, dict) else None
    parts = [str(part) for part in (event or role, tool) if isinstance(part, str) and part]
    return f" ({' '.join(parts)})" if parts else ""


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:79] + "…"


def compare_result(result: Any, scenario: Path, document: Any, *, update: bool) -> None:
    """``belt test --snapshot``: a difference fails the scenario, a bad file is its error."""
    if result.report is None or result.status == "error":
        return
    text = snapshot_text(result.report, virtual_clock=on_virtual_clock(result.report, document))
    try:
        result.snapshot = compare(snapshot_path(scenario), text, update=update)
    except BeltError as exc:
        result.status, result.error = "error", exc.message
        return
    if result.snapshot.failed:
        result.status = "fail"


def on_virtual_clock(report: Mapping[str, object], document: object) -> bool:
    """True when the simulation ran on a virtual clock from a given start, not wall time."""
    if isinstance(document, dict) and document.get("clock") is not None:
        return True
    simulation = cast(dict[str, object], report.get("simulation") or {})
    return bool(simulation.get("clock")) and not simulation.get("clock_from_wall")
