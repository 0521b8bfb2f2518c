"""The live lines ``belt serve`` (and each worker) prints: one per hook request, API call or
sweep, through ``belt.display.output`` (which escapes what came from outside)."""

from __future__ import annotations

import threading
import traceback
import webbrowser
from datetime import datetime
from functools import lru_cache
from typing import Any

from belt.display import output


def render_json(record: dict[str, Any]) -> None:
    """One JSON object per line for each record (``belt serve --json``)."""
    output.print_json_line(record)


def render_record(record: dict[str, Any]) -> None:
    """One live line for a hook request, an API call, a sweep or a run that went on."""
    clock = _clock(record.get("at"))
    kind = record.get("kind")
    if kind == "hook" and not record.get("journal_error"):  # made once per answer given
        middle, style = _kept_hook_line(record)
        output.lines([(f"{clock}  {middle}  {record['duration_ms']:.1f} ms", style)])
        return
    if kind == "sweep":
        settled = ", ".join(f"{s['id']} → {s['resolution']}" for s in record["settled"])
        text, style = f"sweep  settled {settled}", "yellow"
    elif kind == "resume":
        what = record.get("state") or f"could not go on: {record.get('error')}"
        text = f"resume  run {record['run_id']} → {what}"
        style = "red" if record.get("error") else ""
    elif kind == "api":
        status = record["status"]
        text = f"{record['action']} {record['target']}  {status}  {record['detail']}"
        style = "" if status < 400 else "red"
    else:
        middle, style = _hook_line(record)
        text = f"{middle}  {record['duration_ms']:.1f} ms"
    output.lines([(f"{clock}  {text}", style)])
    if kind not in ("sweep", "resume", "api") and record.get("journal_error"):
        output.warning(f"not journalled: {record['journal_error']}")


HOOK_LINE_FIELDS = tuple("name status event error tool decision injected reason redelivery".split())
"""The fields of a hook's record its live line shows, but for its clock and duration."""
HOOK_LINES_KEPT = 256  # how many hook lines (each but its clock and duration) are kept made


def _kept_hook_line(record: dict[str, Any]) -> tuple[str, str]:
    """``_hook_line``, made once for each answer a server gives (its fields the key)."""
    key = tuple(map(record.get, HOOK_LINE_FIELDS))
    try:
        return _hook_line_of(key)
    except TypeError:  # a field that is no string, number or None: made anew
        return _hook_line(record)


@lru_cache(HOOK_LINES_KEPT)
def _hook_line_of(key: tuple[Any, ...]) -> tuple[str, str]:
    return _hook_line(dict(zip(HOOK_LINE_FIELDS, key, strict=True)))


def _hook_line(record: dict[str, Any]) -> tuple[str, str]:
    """A hook's live line between its clock and its duration, and its style."""
    parts = []
    if record.get("name"):
        parts.append(f"[{record['name']}]")
    if record["status"] != 200:
        parts += [str(record.get("event") or "-"), str(record["status"]), record.get("error") or ""]
        style = "bold red"
    else:
        parts.append(record["event"])
        if record.get("tool"):
            parts.append(record["tool"])
        decision = record["decision"]
        parts.append(decision + (" +inject" if record.get("injected") else ""))
        if record.get("reason"):
            parts.append(record["reason"])
        style = DECISION_STYLES.get(decision, "")
    if record.get("redelivery"):
        parts.append("(redelivery, answered as the first time)")
    return "  ".join(parts), style


DECISION_STYLES = {"deny": "red", "stop": "red", "suspend": "yellow"}


def _clock(stamp: Any) -> str:
    """A record's time as the live line shows it: local, to the second."""
    text = str(stamp)
    if len(text) == STAMP_LENGTH and text.endswith("Z") and text[19] == ".":
        text = text[:19] + "Z"  # a stamp belt made: the lines of one second share it
    return _local_clock(text)


STAMP_LENGTH = len("2026-08-11T14:00:00.000Z")


@lru_cache(maxsize=1)
def _local_clock(text: str) -> str:
    try:
        return datetime.fromisoformat(text).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return "--:--:--"


def listening(ready: str, answering: list[str], port: int, inspector: str | None) -> None:
    """The ready line on stderr (stdout has only request lines), a warning when hosts are
    ``answering`` without a token, and the inspector opened in a browser (``--open``)."""
    output.styled(ready, "bold", stderr=True)
    if answering:
        output.warning(
            f"--allow-host without --token: anyone who can reach this machine as "
            f"{' or '.join(answering)} on port {port} can use the whole API "
            "(settle gates, read the journal, run hooks); add --token TOKEN to require a bearer "
            "token"
        )
    if inspector:
        # In a thread: a browser named by $BROWSER may take its time, and requests wait for it.
        threading.Thread(target=webbrowser.open, args=(inspector,), daemon=True).start()


def loop_error(line: str) -> None:
    """A server condition worth one line on stderr (refused connections)."""
    output.warning(line)


def handler_traceback(exc: BaseException) -> None:
    """The traceback of an exception a ``--handler`` raised (``belt serve -v``), on stderr."""
    output.block("".join(traceback.format_exception(exc)).rstrip("\n"), stderr=True)
