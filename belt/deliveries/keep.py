"""Recorded hook deliveries kept as ``belt test`` scenarios (the inspector's "Keep as a test",
``belt replay --save-tests``): a scripted model reaches the same boundary with the same data."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required, TypedDict, cast
from urllib.parse import urlsplit

import tomli_w

from belt.deliveries.effects import url_host
from belt.deliveries.replay import Answer, Replay, Row, SavedTests, open_replay, payload_model
from belt.display.text import printable
from belt.engine.scenario import scenario_from_document
from belt.errors import BeltError, InvalidInput, UsageError
from belt.usercode.loader import is_file_reference, locate_module
from belt.wire.validate import IN_PROCESS_PREFIX, POLICY_PREFIX

# The events a scripted scenario reaches, so those a kept scenario can test; a chat's scenario
# reaches CHAT_EVENTS in the order its runs fired them (the others need --per delivery).
CHAT_EVENTS = tuple(
    f"agent.{e}" for e in "start turn_start turn_complete tool_call complete".split()
)
OTHER_EVENTS = "tool_result pre_compact post_compact error".split()
SIMULATED_EVENTS = (*CHAT_EVENTS, *(f"agent.{e}" for e in OTHER_EVENTS))
EXPECTED = ("allow", "deny", "stop", "suspend", "error")  # a decision, or that the hook fails
EXPECT_FROM = ("recorded", "replayed")  # which answer --save-tests pins
PER = ("delivery", "chat")  # what --save-tests writes as one scenario
CHAT_MAX = 500  # the most deliveries of one chat its scenario holds
PROBLEMS_KEPT = 20

Document = dict[str, object]  # a scenario document (TOML, or JSON when a value has no TOML form)


class Expected(TypedDict, total=False):
    """What a kept scenario expects of its hook (``answer_expected``)."""

    decision: Required[str]
    reason: str | None
    injected: bool


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _hook(event: str, handler: str) -> Document:
    return {"event": event, "type": "webhook", "handler": handler}


def _call(data: Mapping[str, object]) -> Document:
    """The scripted tool call of a recorded ``agent.tool_call``: the same tool and arguments."""
    arguments = _mapping(data.get("arguments"))
    return {"name": str(data.get("tool") or "tool"), "arguments": arguments, "result": "done"}


def _tool_result(data: Mapping[str, object]) -> Document:
    result, status = data.get("result"), data.get("status")
    return {
        "name": str(data.get("tool") or "tool"),
        "arguments": {},
        "result": result if isinstance(result, str) else json.dumps(result, ensure_ascii=False),
        "status": status if status in ("completed", "failed") else "completed",
        "async": True,
    }


def scenario_document(
    payload: Mapping[str, object], handler: str, expect: Mapping[str, object]
) -> Document:
    """A platform scenario whose hook gets the payload's event and data and expects ``expect``."""
    event = str(payload.get("event"))
    if event not in SIMULATED_EVENTS:
        raise InvalidInput(f"payload.event: belt does not simulate {event}, so no test reaches it")
    data = _mapping(payload.get("data"))
    agent: Document = {"name": "replayed", "hooks": [_hook(event, handler)]}
    turn: Document = {"user": "Replay of a recorded hook delivery", "model": [{"say": "Done."}]}
    if event == "agent.tool_call":
        turn["model"] = [
            {"say": "Calling the tool.", "tool_calls": [_call(data)]},
            {"say": "Done."},
        ]
    elif event == "agent.tool_result":
        turn["model"] = [{"tool_calls": [_tool_result(data)]}, {"say": "Done."}]
    elif event == "agent.error":
        turn.update(model=[], error=str(data.get("error") or "the model failed"))
    elif event in ("agent.pre_compact", "agent.post_compact"):
        agent.update(context_window=1000, compact_at=0.5)
        noop = {"name": "noop", "result": "ok"}
        turn["model"] = [{"say": "Working.", "tokens": 900, "tool_calls": [noop]}, {"say": "Done."}]
    return {"agent": agent, "turns": [turn], "expect": [_expectation(event, data, expect)]}


def _exactly(text: str) -> str:
    return "re:^" + re.escape(text) + "$"


def _expectation(event: str, data: Mapping[str, object], expect: Mapping[str, object]) -> Document:
    """The ``[[expect]]`` table of one delivery: its event (and tool), and the answer."""
    expectation: Document = {"event": event}
    if (decision := expect.get("decision")) not in EXPECTED:
        raise InvalidInput(f"expect.decision: expected one of {', '.join(EXPECTED)}")
    if decision == "error":
        expectation["error"] = True
    else:
        expectation["decision"] = decision
        if reason := _text(expect.get("reason")):
            expectation["reason"] = _exactly(reason)
        if isinstance(expect.get("injected"), bool):
            expectation["injected"] = expect["injected"]
    if event in ("agent.tool_call", "agent.tool_result") and data.get("tool"):
        expectation["tool"] = _exactly(str(data["tool"]))
    return expectation


def answer_expected(answer: Answer) -> Expected:
    """What a kept scenario expects of an answer: its decision, reason and injection, or error."""
    if answer.error:
        return {"decision": "error"}
    expect: Expected = {"decision": answer.decision or "allow", "reason": answer.reason}
    if answer.injection is not None:
        expect["injected"] = bool(answer.injection)
    return expect


Kept = tuple[Mapping[str, object], Expected]  # a delivery's payload, and the answer expected


def chat_document(deliveries: list[Kept], handler: str) -> Document:
    """A platform scenario that plays one chat's recorded deliveries again."""
    runs: dict[str, list[Kept]] = {}
    for payload, expect in deliveries:
        runs.setdefault(str(payload.get("run_id")), []).append((payload, expect))
    events = dict.fromkeys(str(payload.get("event")) for run in runs.values() for payload, _ in run)
    turns: list[Document] = []
    expectations: list[Document] = []
    for number, run in enumerate(runs.values()):
        outputs: list[Document] = []
        for payload, expect in run:
            event = str(payload.get("event"))
            data = _mapping(payload.get("data"))
            if event == "agent.turn_start" or (event == "agent.tool_call" and not outputs):
                outputs.append({"say": f"Model turn {len(outputs) + 1}."})
            if event == "agent.tool_call":
                cast(list[Document], outputs[-1].setdefault("tool_calls", [])).append(_call(data))
            expectation = {**_expectation(event, data, expect), "run": number}
            scalars = {
                key: _exactly(value) if isinstance(value, str) else value
                for key, value in _mapping(data.get("arguments")).items()
                if "." not in key and isinstance(value, str | int | float | bool)
            }
            if event == "agent.tool_call" and scalars:
                expectation["arguments"] = scalars
            expectations.append(expectation)
        if not outputs or outputs[-1].get("tool_calls"):
            outputs.append({"say": "Done."})
        turns.append({"user": f"Run {number + 1} of the recorded chat", "model": outputs})
    agent = {"name": "replayed-chat", "hooks": [_hook(event, handler) for event in events]}
    return {"agent": agent, "turns": turns, "expect": expectations}


def _toml(document: Document, lines: list[str], stem: str) -> tuple[str, str, str]:
    """(file name, media type, text): TOML with ``lines`` as comments, or JSON for a null."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:80]
    try:
        body = tomli_w.dumps(document)
    except (TypeError, ValueError):
        return f"{stem}.json", "application/json", json.dumps(document, indent=2) + "\n"
    # A comment line is one line: a policy path with a newline in it must not end it.
    comments = "".join(f"# {printable(line)}\n" for line in lines)
    return f"{stem}.toml", "application/toml", comments + "\n" + body


def kept_scenario(
    *, payload: Any, handler: str, expect: Any, header: list[str]
) -> tuple[str, str, str]:
    """One recorded delivery as a ``belt test`` scenario: (file name, media type, text)."""
    model, problem = payload_model(payload)
    if model is None:
        raise InvalidInput(f"payload: {problem.removeprefix('the recorded payload ')}")
    if not isinstance(expect, dict):
        raise InvalidInput("expect: expected an object with the decision to expect")
    document = scenario_document(payload, handler, expect)
    # Its paths are read where it is saved, which is not known here.
    scenario_from_document(document, "the kept scenario", Path("."), locate=False)
    data = _mapping(payload.get("data"))
    parts = ("replay", str(payload["event"]).removeprefix("agent."), _text(data.get("tool")))
    lines = [
        *header,
        "The model is scripted to reach the same boundary with the same data; ids, times and",
        "turn_count differ from the recorded payload. Run it with: belt test FILE",
    ]
    return _toml(document, lines, "-".join(part for part in parts if part))


def replay_handler(
    *, to: str | None, policy: Path | str | None, handler: str | None, directory: Path | None
) -> tuple[str, list[str]]:
    """The handler a kept scenario names for a replay's target, and notes for its reader."""
    if to is not None:
        refuse_credentials(to)
        return to, []
    if policy is not None:
        return POLICY_PREFIX + _path_from(Path(policy), directory), []
    if handler is None:
        raise InvalidInput("a kept scenario needs the URL, policy or handler it was replayed to")
    module, sep, func = handler.removeprefix(IN_PROCESS_PREFIX).partition(":")
    if not sep:
        raise InvalidInput(f"--handler {handler!r}: expected MODULE:FUNC")
    # A file, or a module of the current directory: named by its file, found from anywhere.
    file, root = (
        (Path(module), None) if is_file_reference(module) else locate_module(module, Path.cwd())
    )
    if file is not None:
        return f"{IN_PROCESS_PREFIX}{_path_from(file, directory)}:{func}", []
    notes = [] if root is None else [f"The hook imports {module} from {root}: run belt test there."]
    return f"{IN_PROCESS_PREFIX}{module}:{func}", notes


def _path_from(path: Path, directory: Path | None) -> str:
    """``path`` as a scenario saved in ``directory`` names it (absolute when it is None)."""
    absolute = os.path.abspath(path)
    named = absolute if directory is None else os.path.relpath(absolute, os.path.abspath(directory))
    return Path(named).as_posix()


def refuse_credentials(url: str) -> None:
    """Refuse (InvalidInput) a URL with a user, password or query: nothing secret goes in a test."""
    try:
        parts = urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        raise InvalidInput(f"--to {url_host(url)}: not a URL a test can keep") from None
    if userinfo or parts.query:
        what = "a user name or password" if userinfo else "a query"
        raise InvalidInput(
            f"--to {url_host(url)}: the URL carries {what}, which can hold credentials, and a "
            "saved test would keep them",
            hint="save the tests from a replay to a URL without them, or to --policy FILE or "
            "--handler MODULE:FUNC",
        )


@dataclass(kw_only=True)
class TestWriter:
    """Writes each replayed delivery (or chat) to ``directory`` as a scenario."""

    __test__ = False  # not a pytest class, whatever its name

    directory: Path
    expect: str
    handler: str
    notes: list[str]
    source: str
    per: str = "delivery"
    chats: dict[str, list[tuple[int, Mapping[str, object], Expected]]] = field(default_factory=dict)
    summary: SavedTests = field(init=False)

    def __post_init__(self) -> None:
        self.summary = SavedTests(
            directory=str(self.directory),
            expect=self.expect,
            per=self.per,
            written=0,
            not_written=0,
            problems=[],
        )

    def write(self, row: Row) -> None:
        """Write ``row``'s delivery as a scenario (or keep it for its chat's), or count it out."""
        expect = answer_expected(row.recorded if self.expect == "recorded" else row.now)
        header = [
            f"A belt test scenario saved by belt replay --save-tests from {self.source}",
            f"(delivery {row.number}), expecting the {self.expect} answer.",
            *self.notes,
        ]
        try:
            if self.per == "chat":
                self.keep(row, expect)
                return
            name, _, text = kept_scenario(
                payload=row.recorded.payload, handler=self.handler, expect=expect, header=header
            )
        except InvalidInput as exc:
            self.summary["not_written"] += 1
            if len(self.summary["problems"]) < PROBLEMS_KEPT:
                self.summary["problems"].append(f"delivery {row.number}: {exc.message}")
            return
        self.save(f"{row.number:04d}-{name}", text)

    def keep(self, row: Row, expect: Expected) -> None:
        """Keep a delivery for its chat's scenario (InvalidInput: a chat's cannot play it)."""
        payload = row.recorded.payload
        model, problem = payload_model(payload)
        if model is None or not isinstance(payload, dict):
            raise InvalidInput(problem)
        if payload["event"] not in CHAT_EVENTS:
            raise InvalidInput(
                f"a chat's scenario does not reach {payload['event']} "
                "(--per delivery writes it alone)"
            )
        kept = self.chats.setdefault(str(payload.get("chat_id")), [])
        if len(kept) >= CHAT_MAX:
            raise InvalidInput(f"its chat has more than {CHAT_MAX} deliveries")
        kept.append((row.number, payload, expect))

    def finish(self) -> None:
        """``per = "chat"``: write each chat's scenario, once every delivery is replayed."""
        for chat_id, kept in self.chats.items():
            numbers = [number for number, _, _ in kept]
            document = chat_document([(p, e) for _, p, e in kept], self.handler)
            header = [
                f"A belt test scenario saved by belt replay --save-tests from {self.source}:",
                f"chat {chat_id}, {len(numbers)} deliveries ({numbers[0]} to {numbers[-1]}), "
                f"expecting the {self.expect} answers.",
                *self.notes,
                "The model is scripted to reach the same boundaries with the same tool calls;",
                "ids, times and what the model said differ from the recorded chat.",
                "Run it with: belt test FILE",
            ]
            name, _, text = _toml(document, header, f"{numbers[0]:04d}-chat-{chat_id}")
            self.save(name, text)
        self.chats.clear()

    def save(self, name: str, text: str) -> None:
        """Write one scenario file to the directory."""
        path = self.directory / name
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BeltError(
                f"--save-tests {path}: cannot write it: {exc.strerror or exc}"
            ) from None
        self.summary["written"] += 1


def save_directory(directory: Path) -> Path:
    """``--save-tests DIR``: a new or empty directory, made when missing."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--save-tests {directory}: not a directory")
    try:
        if directory.is_dir() and any(directory.iterdir()):
            raise UsageError(
                f"--save-tests {directory}: the directory is not empty",
                hint="give a new or empty directory, so the saved tests are one suite",
            )
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BeltError(f"--save-tests {directory}: {exc.strerror or exc}") from None
    return directory


@contextmanager
def open_saving_replay(
    *,
    save_tests: Path | None = None,
    expect: str = "recorded",
    per: str = "delivery",
    **options: Any,
) -> Iterator[Replay]:
    """``open_replay``, each delivery also saved to ``save_tests`` as a scenario when given."""
    for option, given, allowed in (("--expect", expect, EXPECT_FROM), ("--per", per, PER)):
        if given not in allowed:
            raise UsageError(f"{option} {given}: expected one of {', '.join(allowed)}")
    if save_tests is not None:
        named = {key: options.get(key) for key in ("to", "policy", "handler")}
        handler, notes = replay_handler(**named, directory=save_tests)
    with open_replay(**options) as run:
        if save_tests is not None:
            writer = TestWriter(
                directory=save_directory(save_tests),
                expect=expect,
                handler=handler,
                notes=notes,
                source=run.where,
                per=per,
            )
            run.on_row, run.on_end, run.saved = writer.write, writer.finish, writer.summary
        yield run
