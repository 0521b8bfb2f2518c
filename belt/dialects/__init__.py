"""The platforms belt speaks, each a package behind one interface, and the one registry of them.

Shared code asks the dialect a record or a file names (:func:`get`) and never compares its name
(docs/dialects.md). A built-in dialect is imported when first asked for; others come from
:func:`register` or an installed package's ``belt.dialects`` entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict, Unpack

from belt.errors import InvalidInput

if TYPE_CHECKING:
    from belt.dialects.simreport import ReportRun, SimReport

PLATFORM = "platform"
"""The dialect of a record or a scenario that names none."""

BUILTIN = {PLATFORM: "belt.dialects.platform", "nexus": "belt.dialects.nexus"}
"""Each built-in dialect's package, which holds it as ``DIALECT``."""

ENTRY_POINTS = "belt.dialects"
"""The entry point group an installed package lists dialects in (``NAME = "module:DIALECT"``)."""


class HookRun(NamedTuple):
    """One hook run as an expectation reads it."""

    fields: dict[str, object]
    """``event``, ``handler``, ``decision``, ``reason``, ``error`` and what else the dialect has."""
    text: str
    """How it reads in a failure."""
    run_id: Any


class Declared(NamedTuple):
    """A hook a scenario declares, as ``belt test --coverage`` lists it."""

    key: Any
    """What its calls name it by (see :class:`Call`)."""
    hook_index: int | None
    where: str
    event: str
    handler_type: str
    handler: str
    runs_async: bool


class Call(NamedTuple):
    """What one hook call (or what it caused) adds to the coverage of the hook ``key``."""

    key: Any
    fired: bool
    """Whether it is a call (counted, its latency taken), or only an outcome of one."""
    record: Mapping[str, object]
    outcomes: tuple[str, ...]
    tool: str | None = None


InTurn = Callable[[Any], bool]
"""Whether a run id belongs to the turns an expectation looks at."""
TurnOf = Mapping[str, int]
"""The scenario turn each run id answers (:meth:`Dialect.turns`)."""


class ScenarioOptions(TypedDict):
    """How :meth:`Dialect.load_scenario` reads a scenario's hooks and files."""

    hooks_file: str | Path | None
    stored_hooks: bool
    locate: bool


class Dialect(Protocol):
    """What a platform dialect provides to the parts of belt that are shared."""

    @property
    def name(self) -> str:
        """The name a scenario (``dialect = "…"``) and a simulation record carry."""

    @property
    def title(self) -> str:
        """The platform's name in a message ("Nexus")."""

    @property
    def events(self) -> tuple[str, ...]:
        """The events its hooks run on, in the order they fire in a turn."""

    @property
    def gate_events(self) -> tuple[str, ...]:
        """The events a scenario's scripted resolution (``turns.resolve.event``) may open."""

    @property
    def decisions(self) -> tuple[str, ...]:
        """The decisions a hook's answer may carry (an expectation's ``decision``)."""

    @property
    def foreign_subjects(self) -> Mapping[str, str]:
        """Expectation subjects of other dialects, each with the message that refuses it here."""

    @property
    def hook_states(self) -> tuple[str, ...]:
        """The states of a hook call an expectation's ``status`` may name (maybe none)."""

    @property
    def injects(self) -> bool:
        """Whether its hooks inject messages into the context (``injected_tokens`` budgets)."""

    @property
    def profile_hooks(self) -> bool:
        """Whether ``belt hooks doctor`` checks a loaded scenario's ``profile`` as a declaration."""

    @property
    def outcomes(self) -> tuple[str, ...]:
        """What a hook's calls can produce, as ``belt test --coverage`` counts them."""

    def loop(self) -> type[Any]:
        """The driver's loop of this dialect (``belt.engine.simulation.Dialect``)."""

    def scenario_problems(self, doc: Mapping[str, object]) -> list[str]:
        """Keys of a scenario document that belong to another dialect, each with a message."""

    def load_scenario(
        self, doc: Mapping[str, object], source: str, directory: Path, **kw: Unpack[ScenarioOptions]
    ) -> Any:
        """A checked scenario, its files found from ``directory``; InvalidInput naming the key."""

    def turns(self, report: SimReport) -> tuple[dict[str, int], list[ReportRun]]:
        """The scenario turn of each run id, and the runs of the scenario's own chat in order."""

    def run_of_turn(self, report: SimReport, turn: int, turn_of: TurnOf) -> ReportRun | None:
        """The run of scenario turn ``turn`` (``turn_of`` from :meth:`turns`)."""

    def hook_runs(self, report: SimReport) -> list[HookRun]:
        """Every hook run on an event, as an ``event`` expectation reads it."""

    def hook_calls(self, report: SimReport) -> list[tuple[object, object, Mapping[str, object]]]:
        """Every hook call, async ones too: (event, handler, record with its latency/duration)."""

    def fired(self, report: SimReport, event: str, runs: list[ReportRun], in_turn: InTurn) -> int:
        """How many times the ``runs`` (those ``in_turn``) reached the boundary of ``event``."""

    def unnamed_failures(self, report: SimReport) -> bool:
        """Whether a hook call's error fails a test that names no expectation of it."""

    def declared(self, loaded: Any, report: SimReport | None) -> list[Declared]:
        """The hooks a loaded scenario declares (and its report says it used), for coverage."""

    def calls(self, report: SimReport) -> list[Call]:
        """Each hook call of a report as coverage counts it against :meth:`declared`."""

    def transcript_lines(self, report: SimReport, *, verbose: bool) -> list[tuple[str, str]]:
        """A report as (line, style) pairs; ``verbose`` adds the hook calls that changed nothing."""

    def message_lines(self, message: Mapping[str, object]) -> list[tuple[str, str]]:
        """One message of a transcript (with its hook rows), as the transcript shows it."""


Keys = Mapping[str, str]
"""Keys of a scenario document, each with the message that refuses it."""


def foreign_keys(doc: Mapping[str, object], top: Keys, turn: Keys, call: Keys) -> list[str]:
    """Keys of another dialect in a scenario document, each ``path: why``: ``top`` by dotted path,
    ``turn`` in each turn, ``call`` in each tool call of a turn or of its model rounds."""
    problems = []
    for path, why in top.items():
        parent, _, key = path.rpartition(".")
        if key in (_table(doc.get(parent)) if parent else doc):
            problems.append(f"{path}: {why}")
    for t, found in enumerate(_items(doc.get("turns"))):
        spec, at = _table(found), f"turns[{t}]"
        problems += [f"{at}.{key}: {why}" for key, why in turn.items() if key in spec]
        rounds = enumerate(_items(spec.get("model")))
        holders = [(at, spec), *((f"{at}.model[{m}]", _table(r)) for m, r in rounds)]
        for where, holder in holders:
            for c, keys in enumerate(map(_table, _items(holder.get("tool_calls")))):
                path = f"{where}.tool_calls[{c}]"
                problems += [f"{path}.{key}: {why}" for key, why in call.items() if key in keys]
    return problems


def _table(found: object) -> Mapping[str, object]:
    return found if isinstance(found, dict) else {}


def _items(found: object) -> list[object]:
    return found if isinstance(found, list) else []


_known: dict[str, Dialect] = {}


def register(dialect: Dialect) -> None:
    """Make ``dialect`` known by its name, for this process (a built-in name is refused)."""
    if dialect.name in BUILTIN:
        raise InvalidInput(f"dialect {dialect.name!r}: the name of a built-in dialect")
    _known[dialect.name] = dialect


def forget(name: str) -> None:
    """Undo :func:`register` of the dialect ``name`` (a built-in one stays)."""
    if name not in BUILTIN:
        _known.pop(name, None)


def names() -> tuple[str, ...]:
    """The dialects known so far: the built-in ones, then those registered."""
    return (*BUILTIN, *(name for name in _known if name not in BUILTIN))


def known(name: str) -> bool:
    """Whether a dialect of that name is built in, registered or installed."""
    with suppress(KeyError):
        return get(name) is not None
    return False


def get(name: str) -> Dialect:
    """The dialect of that name; KeyError when no dialect has it."""
    if name not in _known:
        if name in BUILTIN:
            _known[name] = import_module(BUILTIN[name]).DIALECT
        else:
            from importlib.metadata import entry_points  # noqa: PLC0415 - only for a name not built in

            points = list(entry_points(group=ENTRY_POINTS, name=name))
            if not points:
                raise KeyError(name)
            _known[name] = points[0].load()
    return _known[name]


def speaking(event: str) -> Dialect:
    """The built-in dialect whose hooks run on ``event`` (the platform's for an event of none)."""
    found = (get(name) for name in BUILTIN)
    return next((d for d in found if event in d.events), get(PLATFORM))


def of(record: Mapping[str, Any]) -> Dialect:
    """The dialect a simulation record (or a loaded scenario's report) was made in."""
    return get(str(record.get("dialect") or PLATFORM))


def loop_of(sim: Mapping[str, Any]) -> type[Any]:
    """The driver's loop of the dialect a simulation record was made in."""
    return of(sim).loop()
