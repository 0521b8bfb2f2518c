"""All terminal rendering: the only module that imports rich.

Colour follows ``NO_COLOR`` and TTY detection, the layout TTY detection alone. Much of what belt
prints came from outside: every function here shows control characters, lone surrogates and bidi
controls as visible escapes (``\x1b``, ``\u202e``), and never interprets rich markup in text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


# The bidirectional controls (ALM, LRM, RLM, LRE-RLO, LRI-PDI): shown raw, U+202E reverses the
# text after it, so a file name or a reason could read as something else (Trojan Source).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff{BIDI_CONTROLS}]")
_UNSAFE_IN_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{BIDI_CONTROLS}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# JSON escapes C0 itself; DEL, C1, lone surrogates and the bidi controls it would write raw.
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f\ud800-\udfff{BIDI_CONTROLS}]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def clean(text: str) -> str:
    """``text`` with every control character and lone surrogate as a visible escape."""
    return _UNSAFE.sub(_escape, text)


def clean_block(text: str) -> str:
    """``clean`` for a multi-line document belt wrote itself: newlines and tabs are kept."""
    return _UNSAFE_IN_BLOCK.sub(_escape, text)


def json_text(
    data: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None
) -> str:
    """JSON text that is safe on a terminal and still the same JSON value (piped too)."""
    text = json.dumps(data, indent=indent, ensure_ascii=False, separators=separators)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@lru_cache(maxsize=8)  # stdout and stderr, and those a test puts in their place
def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (it sets the layout, whatever NO_COLOR says); asked once."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _wants_colour(stream: Any) -> bool:
    """Whether ``stream`` gets colour (and styles): a terminal, without NO_COLOR."""
    return is_terminal(stream) and not os.environ.get("NO_COLOR")  # the kept answer first


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout or stderr, made once for each stream and setting."""
    stream = sys.stderr if stderr else sys.stdout
    return _console(stream, _wants_colour(stream), is_terminal(stream), os.environ.get("COLUMNS"))


@lru_cache(maxsize=8)
def _console(stream: Any, colour: bool, terminal: bool, columns: str | None) -> Console:
    """The console of ``console``; ``columns`` ($COLUMNS, which rich reads once) is of its key."""
    from rich.console import Console

    return Console(
        file=stream,
        no_color=not colour,
        color_system="auto" if colour else None,
        highlight=False,
        soft_wrap=not terminal,
        force_terminal=terminal or None,
        emoji=False,
    )


# Whether this command began its JSON document on stdout: an error is not a second one there.
_printed_document: list[bool] = []


def printed_document() -> bool:
    """Whether this command has printed (or begun) its JSON document on stdout."""
    return bool(_printed_document)


def forget_document() -> None:
    """A new command begins: nothing is printed on stdout yet."""
    _printed_document.clear()


def print_json(data: Any) -> None:
    """Print one JSON document on stdout."""
    _printed_document.append(True)
    _write(json_text(data, indent=2), stderr=False)


def json_printed(wanted: bool, data: Any) -> bool:
    """With ``--json`` (``wanted``), print ``data`` as the command's JSON document; returns it."""
    if wanted:
        print_json(data)
    return wanted


def print_json_line(data: Any) -> None:
    """Print one JSON object on one line (streams)."""
    _write(json_text(data, separators=(",", ":")), stderr=False)


def print_json_stream(
    head: Mapping[str, object],
    key: str,
    items: Iterable[object],
    tail: Callable[[], Mapping[str, object]],
) -> None:
    """``print_json`` of ``{**head, key: [*items], **tail()}``, each item written as it comes."""
    _printed_document.append(True)
    sys.stdout.write(json_text({**head, key: []}, indent=2).removesuffix("[]\n}"))
    count = 0
    for count, item in enumerate(items, 1):
        nested = json_text(item, indent=2).replace("\n", "\n    ")
        sys.stdout.write(("," if count > 1 else "[") + f"\n    {nested}")
        if count % 100 == 0:
            sys.stdout.flush()
    sys.stdout.write("\n  ]" if count else "[]")
    sys.stdout.write(json_text({key: [], **tail()}, indent=2).split("[]", 1)[1] + "\n")
    sys.stdout.flush()


def echo(text: str = "", *, stderr: bool = False) -> None:
    """Print one plain line to stdout (or stderr), control characters escaped."""
    _write(clean(text), stderr=stderr)


def block(text: str, *, stderr: bool = False) -> None:
    """Print a multi-line document belt generated (an export, a script), controls escaped."""
    _write(clean_block(text), stderr=stderr)


def _write(text: str, *, stderr: bool) -> None:
    stream = sys.stderr if stderr else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def styled(text: str, style: str, *, stderr: bool = False) -> None:
    """Print one line in a rich style when colour is on, plainly otherwise."""
    lines([(text, style)], stderr=stderr)


def error(message: str) -> None:
    """Print an error line on stderr."""
    styled(f"error: {message}", "bold red", stderr=True)


def warning(message: str) -> None:
    """Print a warning line on stderr."""
    styled(f"warning: {message}", "yellow", stderr=True)


def success(message: str) -> None:
    """Print a success line on stdout."""
    styled(message, "green")


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    ids: Collection[int] = (),
    short: bool = True,
) -> None:
    """Rows as a table on a terminal (else each row a block), aligned plain text when piped."""
    _pages(columns, [rows], ids=ids if short else ())


def listing(
    json_: bool,
    data: Any,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    empty: str,
    ids: Collection[int] = (),
    short: bool = True,
) -> None:
    """``data`` with ``--json``; else ``rows`` as a ``table``, or ``empty`` on stderr if none."""
    if not json_printed(json_, data):
        if rows:
            table(columns, rows, ids=ids, short=short)
        else:
            echo(empty, stderr=True)


def table_stream(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, page: int = 500) -> int:
    """Rows as ``table`` does while they come, ``page`` at a time; how many were printed."""
    remaining = iter(rows)
    return _pages(columns, iter(lambda: list(islice(remaining, page)), []))


def _pages(
    columns: Sequence[str], pages: Iterable[Sequence[Sequence[Any]]], *, ids: Collection[int] = ()
) -> int:
    """Print each page of rows as it comes, laid out as ``table`` says; returns the rows' count."""
    widths: list[int] | None = None
    as_records = False
    count = 0
    for number, page in enumerate(pages):
        count += len(page)
        cells = [["" if value is None else clean(str(value)) for value in row] for row in page]
        header = number == 0
        if not is_terminal(sys.stdout):
            widths = [
                max([width, *(len(row[i]) for row in cells)])
                for i, width in enumerate(widths or [len(column) for column in columns])
            ]
            for line in [list(columns), *cells] if header else cells:
                echo("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
            continue
        if ids:
            from belt.records.names import short_id  # noqa: PLC0415 - start-up: belt version loads no store

            cells = [[short_id(v) if i in ids else v for i, v in enumerate(row)] for row in cells]
        room = console().width
        fitted = None if as_records else _fitted_widths(columns, cells, room)
        if fitted is None:
            _records(columns, cells, first=header)
            as_records = True
            continue
        if widths is not None:
            wider = [max(a, b) for a, b in zip(widths, fitted, strict=True)]
            if sum(wider) + _GAP * (len(columns) - 1) <= room:
                fitted = wider
        widths = fitted
        _rich_table(columns, cells, widths=widths, header=header)
    return count


_TEXT = 12  # the narrowest a column of text is wrapped to (a table narrower is blocks)
_GAP = 3  # the characters rich puts between two columns of a table without edges: " │ "


def _fitted_widths(columns: Sequence[str], cells: list[list[str]], width: int) -> list[int] | None:
    """Column widths of a table ``width`` wide in which no word is cut, or None if none fits."""
    from rich.cells import cell_len

    texts = list(zip(columns, *cells, strict=True))  # each column's heading, then its cells
    most = [max(map(cell_len, column)) for column in texts]
    longest_word = [max(map(cell_len, " ".join(column).split()), default=0) for column in texts]
    least = [max(word, min(widest, _TEXT)) for word, widest in zip(longest_word, most, strict=True)]
    room = width - _GAP * (len(columns) - 1)
    if sum(least) > room:
        return None
    widths = list(least)
    spare = room - sum(least)
    # The narrowest wants first, so a column that needs a little more gets it whole.
    wanting = sorted(range(len(columns)), key=lambda i: most[i] - least[i])
    for n, i in enumerate(wanting):
        give = min(most[i] - widths[i], spare // (len(wanting) - n))
        widths[i] += give
        spare -= give
    return widths


def _records(columns: Sequence[str], cells: list[list[str]], *, first: bool) -> None:
    """Each row as a block of ``column: value`` lines, a blank line before each but the first."""
    from rich.text import Text

    out = console()
    colour = _wants_colour(sys.stdout)
    label_width = max(len(c) for c in columns) + 2
    wrap = textwrap.TextWrapper(
        max(out.width - label_width, 20), break_long_words=False, break_on_hyphens=False
    ).wrap
    for number, row in enumerate(cells):
        if number or not first:
            echo()
        for column, value in zip(columns, row, strict=True):
            if not value:
                continue
            label = f"{clean(column)}:".ljust(label_width)
            for n, part in enumerate(wrap(value) or [value]):
                head = label if n == 0 else " " * label_width
                if colour:
                    out.print(Text.assemble((head, "bold"), part), soft_wrap=True)
                else:
                    echo(head + part)


def _rich_table(
    columns: Sequence[str], cells: list[list[str]], *, widths: list[int], header: bool
) -> None:
    from rich.table import Table
    from rich.text import Text

    rich_table = Table(header_style="bold", show_edge=False, pad_edge=False, show_header=header)
    for column, width in zip(columns, widths, strict=True):
        rich_table.add_column(Text(clean(column)), width=width, overflow="fold")
    for row in cells:
        # Text, not str: a cell holding "[bold]" or "[/]" is shown as it is, not as markup.
        rich_table.add_row(*(Text(cell) for cell in row))
    console().print(rich_table)


def key_values(pairs: Sequence[tuple[str, Any]]) -> None:
    """Render labelled values, one per line."""
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        if value is None or value == "":
            continue
        text = value if isinstance(value, str) else json_text(value)
        echo(f"{key.ljust(width)}  {text}")


def lines(rows: Sequence[tuple[str, str]], *, stderr: bool = False) -> None:
    """Print (text, style) lines: styled on a colour terminal, plain otherwise."""
    if not _wants_colour(sys.stderr if stderr else sys.stdout):
        for text, _style in rows:
            echo(text, stderr=stderr)
        return
    from rich.text import Text

    out = console(stderr=stderr)
    for text, style in rows:
        out.print(Text(clean(text), style=style or ""))


class LiveLine:
    """A line on a terminal's stderr, rewritten every ``interval`` seconds until ``stop``."""

    def __init__(self, text: Callable[[], str], *, interval: float = 1.0) -> None:
        self._text = text
        self._interval = interval
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Show the line and keep it current (on a terminal)."""
        if not is_terminal(sys.stderr) or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="belt-live-line", daemon=True)
        self._thread.start()

    def _draw(self, blank: bool = False) -> None:
        width = shutil.get_terminal_size().columns
        sys.stderr.write("\r\x1b[2K" + ("" if blank else clean(self._text())[: max(width - 1, 1)]))
        sys.stderr.flush()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._draw()
            if self._stopped.wait(self._interval):
                return

    @contextmanager
    def printing(self) -> Iterator[None]:
        """Lines printed inside this block go above the line: it is cleared, then drawn again."""
        if self._thread is None:
            yield
            return
        with self._lock:
            self._draw(blank=True)
            try:
                yield
            finally:
                self._draw()

    def stop(self) -> None:
        """Stop rewriting the line and clear it."""
        if self._thread is None:
            return
        self._stopped.set()
        self._thread.join()
        self._thread = None
        self._draw(blank=True)
