"""Hook traces written with ``--trace FILE`` (OTLP JSON lines, docs/tracing.md): the span trees
of belt sim, belt test, belt check and belt replay, a failed hook, a gate settled by another
process, nothing imported when tracing is off, one line of advice when the extra is missing,
and no payload text in any span."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.outgoing import tracing
from tests.cli import runner
from tests.fake_platform import FakePlatform
from tests.servers import REFUSED

ROOT = Path(__file__).resolve().parent.parent
GUARDED = ROOT / "examples" / "tests" / "guarded.toml"


def untraced_env(**more: str) -> dict[str, str]:
    """This process's environment without any OpenTelemetry variable, and ``more``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, **more}


def python(*args: str, cwd: Path | str = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` as a process of its own, with ``env`` and no other OpenTelemetry
    variable."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=untraced_env(**env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def belt(*args: str, cwd: Path | str = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """``belt ARGS`` as a process of its own."""
    return python("-m", "belt", *args, cwd=cwd, **env)


def in_process(*args: str, cwd: Path | str = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """``belt ARGS`` run in this process (tests/cli/runner.py), in ``cwd``, with ``env`` and no
    other OpenTelemetry variable; its spans flushed once it ended, as at a process's exit."""
    saved, wanted = dict(os.environ), untraced_env(**env)
    os.environ.clear()
    os.environ.update(wanted)
    try:
        with contextlib.chdir(cwd):
            done = runner.belt(*args)
    finally:
        tracing.shutdown()
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


def value(any_value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as Python (64-bit integers are strings in OTLP/JSON)."""
    (kind, found), *_ = any_value.items()
    if kind == "intValue":
        return int(found)
    if kind == "arrayValue":
        return [value(item) for item in found.get("values", [])]
    return found


class Spans:
    """The spans of a trace file, and its resources, by the OTLP/JSON of each line."""

    def __init__(self, path: Path) -> None:
        self.lines = [json.loads(line) for line in path.read_text().splitlines()]
        self.all: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        for line in self.lines:
            for resource_spans in line["resourceSpans"]:
                attributes = resource_spans["resource"]["attributes"]
                self.resources.append({a["key"]: value(a["value"]) for a in attributes})
                for scope in resource_spans["scopeSpans"]:
                    for span in scope["spans"]:
                        span["attrs"] = {
                            a["key"]: value(a["value"]) for a in span.get("attributes", [])
                        }
                        self.all.append(span)
        self.all.sort(key=lambda span: int(span["startTimeUnixNano"]))

    def named(self, name: str) -> list[dict[str, Any]]:
        """The spans named ``name`` (or ``name`` and what it is about: ``belt.hook EVENT``), in
        the order they started."""
        return [s for s in self.all if s["name"] == name or s["name"].startswith(name + " ")]

    def one(self, name: str) -> dict[str, Any]:
        """The one span ``named(name)``."""
        found = self.named(name)
        assert len(found) == 1, [span["name"] for span in self.all]
        return found[0]

    def children(self, parent: dict[str, Any]) -> list[dict[str, Any]]:
        """The spans whose parent is ``parent``, in the order they started."""
        return [s for s in self.all if s.get("parentSpanId") == parent["spanId"]]

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        """The parent of ``span`` (in the file)."""
        return next(s for s in self.all if s["spanId"] == span["parentSpanId"])


ERROR = 2
"""OTLP's STATUS_CODE_ERROR."""


def test_a_guarded_agent_run_is_one_trace_of_run_turns_model_and_tool_calls_and_hooks(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.jsonl"
    done = in_process("sim", "run", str(GUARDED), "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    spans = Spans(trace)
    assert {span["traceId"] for span in spans.all} == {spans.all[0]["traceId"]}
    line = spans.lines[0]["resourceSpans"][0]
    assert line["scopeSpans"][0]["scope"]["name"] == "belt"
    assert spans.resources[0]["service.name"] == "belt"
    for span in spans.all:  # OTLP/JSON: hex ids, nanoseconds as strings, camelCase names
        assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
        int(span["traceId"], 16), int(span["spanId"], 16)
        assert isinstance(span["startTimeUnixNano"], str)
        assert isinstance(span["endTimeUnixNano"], str)

    runs = spans.named("invoke_agent")
    run = runs[0]
    assert "parentSpanId" not in run
    assert run["name"] == "invoke_agent guarded-agent"
    assert run["attrs"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attrs"]["gen_ai.agent.name"] == "guarded-agent"
    assert run["attrs"]["belt.run.id"].startswith("ar_")
    assert run["attrs"]["belt.dialect"] == "platform"
    # The gate held the run; the scenario's resolution let it go on, in the same trace.
    assert run["attrs"]["belt.run.end"] == "held"
    assert runs[-1]["attrs"]["belt.run.end"] == "completed"
    assert runs[-1]["attrs"]["belt.run.resumed"] is True
    assert spans.parent(runs[-1]) == run

    turns = spans.named("belt.turn")
    # The turn held at the gate goes on in the resumed run: a span of the same index there.
    assert [turn["attrs"]["belt.turn.index"] for turn in turns] == [0, 1, 1, 2]
    assert [spans.parent(turn) for turn in turns] == [run, run, runs[-1], runs[-1]]
    assert [s["name"] for s in spans.children(turns[2])] == ["execute_tool delete_file"]
    assert spans.parent(turns[0]) == run
    first = spans.children(turns[0])
    assert [span["name"] for span in first] == [
        "belt.hook agent.turn_start",
        "chat scripted",
        "execute_tool delete_file",
    ]
    turn_start, model, tool = first
    assert model["attrs"]["gen_ai.operation.name"] == "chat"
    assert model["attrs"]["gen_ai.request.model"] == "scripted"
    assert tool["attrs"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attrs"]["gen_ai.tool.name"] == "delete_file"
    assert tool["attrs"]["gen_ai.tool.call.id"].startswith("call_")
    assert turn_start["attrs"]["belt.hook.handler_type"] == "py"
    assert turn_start["attrs"]["belt.hook.decision"] == "allow"
    reminder = "Reminder: only files under /tmp/ may be deleted."
    assert turn_start["attrs"]["belt.hook.injection_size"] == len(reminder)

    (denied,) = spans.children(tool)
    assert denied["name"] == "belt.hook agent.tool_call"
    assert denied["attrs"] == {
        "belt.hook.event": "agent.tool_call",
        "belt.hook.handler_type": "py",
        "belt.hook.async": False,
        "belt.hook.decision": "deny",
        "belt.hook.reason": "only /tmp deletions allowed",
        "belt.dialect": "platform",
    }
    assert denied.get("status", {}).get("code") != ERROR

    # The second tool call: allowed by the guard, then held by the gate; the gate's span runs
    # from its opening to its settlement and links to the span that settled it.
    tool = next(s for s in spans.children(turns[1]) if s["name"].startswith("execute_tool"))
    guard, gate_hook = spans.children(tool)
    assert guard["attrs"]["belt.hook.decision"] == "allow"
    assert gate_hook["attrs"]["belt.hook.handler_type"] == "gate"
    assert gate_hook["attrs"]["belt.hook.decision"] == "suspend"
    gate = spans.one("belt.gate")
    assert spans.parent(gate) == gate_hook
    assert gate["attrs"]["belt.gate.reason"] == "hook_gate"
    assert gate["attrs"]["belt.gate.status"] == "resolved"
    assert gate["attrs"]["belt.gate.resolution"] == "allow"
    assert int(gate["startTimeUnixNano"]) <= int(gate["endTimeUnixNano"])
    (link,) = gate["links"]
    settlement = next(s for s in spans.all if s["spanId"] == link["spanId"])
    assert settlement["name"] == "belt.settlement"
    hold = spans.one("belt.hold")
    assert spans.parent(hold) == turns[1]
    assert hold["attrs"] == {"belt.hold.state": "input_required", "belt.hold.reason": "hook_gate"}


def test_a_compaction_is_a_span_around_its_hooks(tmp_path: Path) -> None:
    (tmp_path / "handlers.py").write_text("def allow(payload):\n    return None\n")
    hooks = [
        {"event": event, "type": "webhook", "handler": "py:handlers.py:allow"}
        for event in ("agent.pre_compact", "agent.post_compact")
    ]
    turns = [
        {"user": "first", "model": [{"say": "a", "tokens": 60}]},
        {"user": "second", "model": [{"say": "b", "tokens": 10}]},
    ]
    agent = {"name": "compacting", "context_window": 100, "compact_at": 0.5, "hooks": hooks}
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"agent": agent, "turns": turns}))
    trace = tmp_path / "trace.jsonl"
    done = in_process("sim", "run", str(scenario), "--trace", str(trace), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spans = Spans(trace)
    compaction = spans.one("belt.compaction")
    assert spans.parent(compaction)["name"] == "belt.turn"
    assert compaction["attrs"] == {"belt.compaction.skipped": False}
    assert [s["name"] for s in spans.children(compaction)] == [
        "belt.hook agent.pre_compact",
        "belt.hook agent.post_compact",
    ]


def test_a_nexus_run_has_executor_hooks_and_a_continuation(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    done = in_process(
        "sim",
        "run",
        "examples/nexus-stop-loop.toml",
        "--executor",
        "verify=cmd:examples/nexus-verify.sh",
        "--trace",
        str(trace),
    )
    assert done.returncode == 0, done.stderr
    spans = Spans(trace)
    run = spans.one("invoke_agent")
    assert run["attrs"]["belt.dialect"] == "nexus"
    first, second = spans.named("belt.turn")
    assert [s["name"] for s in spans.children(first)] == [
        "belt.hook turn_start",
        "chat scripted",
        "belt.hook stop",
        "belt.continuation",
    ]
    asked = spans.children(first)[2]
    assert asked["attrs"]["belt.hook.handler_type"] == "executor"
    assert asked["attrs"]["belt.hook.tool"] == "verify"
    assert asked["attrs"]["belt.hook.decision"] == "continue"
    feedback = "Run the tests and report whether they pass."
    assert asked["attrs"]["belt.hook.injection_size"] == len(feedback)
    assert feedback not in trace.read_text()
    assert spans.children(first)[3]["attrs"] == {"belt.continuation.index": 1}
    accepted = spans.children(second)[-1]
    assert accepted["attrs"]["belt.hook.decision"] == "acknowledge"
    assert accepted["attrs"]["belt.dialect"] == "nexus"


def failing_scenario(directory: Path) -> Path:
    path = directory / "failing.toml"
    path.write_text(
        "[agent]\n"
        'name = "failing"\n'
        "[[agent.hooks]]\n"
        'event = "agent.tool_call"\n'
        'type = "webhook"\n'
        f'handler = "http://{REFUSED}/hooks/secret-path?token=t0ps3cret"\n'
        "timeout = 2\n"
        "[[turns]]\n"
        'user = "go"\n'
        "  [[turns.model]]\n"
        '  tool_calls = [ { name = "ls", result = "." } ]\n'
    )
    return path


@pytest.mark.parametrize(("flags", "counted"), [((), "allow"), (("--fail-closed",), "deny")])
def test_a_failed_hook_is_an_error_span_that_says_how_it_was_counted(
    tmp_path: Path, flags: tuple[str, ...], counted: str
) -> None:
    trace = tmp_path / "trace.jsonl"
    done = in_process("sim", "run", str(failing_scenario(tmp_path)), *flags, "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    hook = Spans(trace).one("belt.hook agent.tool_call")
    assert hook["status"]["code"] == ERROR
    assert hook["attrs"]["belt.hook.counted_as"] == counted
    assert hook["attrs"]["belt.hook.decision"] == counted
    assert hook["attrs"]["belt.hook.host"] == REFUSED
    assert hook["attrs"]["belt.hook.error"].startswith(f"cannot connect to {REFUSED}")
    assert "secret-path" not in trace.read_text() and "t0ps3cret" not in trace.read_text()


def test_a_belt_test_run_has_a_span_per_scenario_under_the_suite(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "examples" / "tests", suite, ignore=shutil.ignore_patterns("*.py[co]"))
    trace = tmp_path / "trace.jsonl"
    done = belt("test", "suite", "-j", "2", "--trace", str(trace), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spans = Spans(trace)
    root = spans.one("belt.test")
    assert root["name"] == "belt.test"
    scenarios = spans.named("belt.test.scenario")
    names = sorted(span["name"].removeprefix("belt.test.scenario ") for span in scenarios)
    assert names == sorted(str(path.relative_to(tmp_path)) for path in suite.rglob("*.toml")), names
    for scenario in scenarios:
        assert spans.parent(scenario) == root
        assert scenario["attrs"]["belt.test.status"] == "pass"
        assert [child["name"] for child in spans.children(scenario)][0].startswith("invoke_agent")
    assert root["attrs"]["belt.test.pass"] == len(scenarios)


def test_a_check_has_a_span_per_case_under_the_check(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    done = in_process(
        "check",
        "py:examples/handler.py:decide",
        "--event",
        "agent.tool_call",
        "--examples",
        "5",
        "--seed",
        "1",
        "--trace",
        str(trace),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    spans = Spans(trace)
    root = spans.one("belt.check")
    assert root["name"] == "belt.check"
    cases = spans.named("belt.check.case")
    assert len(cases) >= 5
    assert root["attrs"]["belt.check.cases"] == sum(c["attrs"]["belt.check.counted"] for c in cases)
    for case in cases:
        assert spans.parent(case) == root
        assert case["attrs"]["belt.check.event"] == "agent.tool_call"


def test_a_replay_has_a_hook_span_per_delivery(tmp_path: Path) -> None:
    run = in_process("sim", "run", str(GUARDED), "--json")
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["runs"][0]["id"]
    trace = tmp_path / "trace.jsonl"
    done = in_process(
        "replay", run_id, "--handler", "examples/tests/hooks.py:guard", "--trace", str(trace)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    spans = Spans(trace)
    root = spans.one("belt.replay")
    hooks = spans.children(root)
    assert [span["name"] for span in hooks] == [
        "belt.hook agent.turn_start",
        "belt.hook agent.tool_call",
        "belt.hook agent.turn_start",
        "belt.hook agent.tool_call",
        "belt.hook agent.turn_start",
    ]
    assert root["attrs"]["belt.replay.replayed"] == len(hooks)
    assert hooks[1]["attrs"]["belt.hook.decision"] == "deny"
    assert hooks[1]["attrs"]["belt.replay.recorded_decision"] == "deny"
    assert hooks[1]["attrs"]["belt.hook.handler_type"] == "py"


def test_a_gate_settled_by_another_traced_process_ends_in_the_runs_trace(tmp_path: Path) -> None:
    scenario = tmp_path / "gated.toml"
    scenario.write_text(
        '[agent]\nname = "gated"\n'
        '[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "gate"\ntimeout = 600\n'
        '[[turns]]\nuser = "go"\n'
        '  [[turns.model]]\n  tool_calls = [ { name = "ls", result = "." } ]\n'
    )
    opened = tmp_path / "opened.jsonl"
    held = in_process("sim", "run", str(scenario), "--json", "--trace", str(opened))
    assert held.returncode == 0, held.stderr
    run_id = json.loads(held.stdout)["runs"][0]["id"]
    (gate_hook,) = Spans(opened).named("belt.hook agent.tool_call")
    assert Spans(opened).named("belt.gate") == []  # not settled yet

    # Settled by a process of its own with tracing on (as belt serve's API settles it).
    settled = tmp_path / "settled.jsonl"
    settle = (
        "import sys; from pathlib import Path; from belt.outgoing import tracing\n"
        "from belt.records.interrupts import list_interrupts, resolve_interrupt\n"
        "tracing.start(trace_file=Path(sys.argv[1]))\n"
        "with tracing.span('settle'):\n"
        "    for gate in list_interrupts(run_id=sys.argv[2]):\n"
        "        resolve_interrupt(interrupt_id=gate['id'], decision='deny')\n"
    )
    done = python("-c", settle, str(settled), run_id)
    assert done.returncode == 0, done.stderr
    spans = Spans(settled)
    gate, settler = spans.one("belt.gate"), spans.one("settle")
    assert gate["traceId"] == gate_hook["traceId"]
    assert gate["parentSpanId"] == gate_hook["spanId"]
    assert int(gate["startTimeUnixNano"]) >= int(gate_hook["startTimeUnixNano"])
    assert int(gate["endTimeUnixNano"]) >= int(settler["startTimeUnixNano"])
    assert gate["links"] == [
        {
            "traceId": settler["traceId"],
            "spanId": settler["spanId"],
            "flags": gate["links"][0]["flags"],
        }
    ]
    assert gate["attrs"]["belt.gate.resolution"] == "deny"

    # The store's record keeps the trace; its InterruptDTO does not.
    shown = in_process("interrupt", "list", run_id, "--all", "--json")
    assert shown.returncode == 0, shown.stderr
    assert "trace" not in json.loads(shown.stdout)[0]


def test_a_parent_with_damaged_ids_starts_a_trace_of_its_own(tmp_path: Path) -> None:
    # A resumed run's stored trace, edited or damaged, must not fail the run.
    traced = tmp_path / "traced.jsonl"
    script = (
        "import sys; from pathlib import Path; from belt.outgoing import tracing\n"
        "tracing.start(trace_file=Path(sys.argv[1]))\n"
        "with tracing.span('resumed', parent={'trace_id': 'damaged', 'span_id': 'zz'}):\n"
        "    pass\n"
    )
    done = python("-c", script, str(traced))
    assert done.returncode == 0, done.stderr
    assert not Spans(traced).one("resumed").get("parentSpanId")


PROBE = """
import json, os, sys
args, again = sys.argv[1:], os.environ.pop("PROBE_AGAIN_WITHOUT", None)

def run():
    sys.argv = ["belt", *args]
    try:
        main()
    except SystemExit as done:
        if done.code:
            raise

try:
    from belt.cli import main
    run()
    if again is not None:
        for name in json.loads(again):
            del os.environ[name]
        run()
finally:
    loaded = [name for name in sys.modules if name.split(".")[0] in ("opentelemetry", "google")]
    sys.__stderr__.write("\\nLOADED " + json.dumps(loaded) + "\\n")
"""


def loaded_by(*args: str, again_without: tuple[str, ...] = (), **env: str) -> list[str]:
    """The OpenTelemetry (and protobuf) modules ``belt ARGS`` imported, in a fresh process;
    with ``again_without``, run a second time in that process without those variables."""
    if again_without:
        env["PROBE_AGAIN_WITHOUT"] = json.dumps(again_without)
    done = python("-c", PROBE, *args, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[str] = json.loads(done.stderr.rsplit("LOADED ", 1)[1])
    return found


@pytest.mark.parametrize(
    "args",
    [
        ("sim", "run", str(GUARDED)),
        ("test", str(ROOT / "examples" / "tests")),
        ("check", "py:examples/handler.py:decide", "--examples", "3", "--event", "agent.start"),
        ("replay", "RUN", "--handler", "examples/tests/hooks.py:guard"),
    ],
    ids=["sim", "test", "check", "replay"],
)
def test_with_tracing_off_no_opentelemetry_module_is_imported(args: tuple[str, ...]) -> None:
    if args[0] == "replay":
        run = in_process("sim", "run", str(GUARDED), "--json")
        assert run.returncode == 0, run.stderr
        args = ("replay", json.loads(run.stdout)["runs"][0]["id"], *args[2:])
    # The variables that only tune an exporter turn nothing on; nor does the command without
    # them, run again in the same process (modules once imported stay in sys.modules).
    tuning = {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}
    assert loaded_by(*args, again_without=tuple(tuning), **tuning) == []


SERVED = """
import json, sys
from starlette.testclient import TestClient
from belt.server.app import create_app_from_settings
from belt.wire.samples import sample_payload
app = create_app_from_settings({"POLICY": sys.argv[1]})
with TestClient(app, base_url="http://127.0.0.1") as client:
    payload = sample_payload("agent.tool_call", data={"tool": "delete_file", "arguments": {}})
    hook = client.post("/hooks/guard", json=payload, headers={"traceparent": TRACEPARENT})
    assert hook.status_code == 200, hook.text
    assert client.get("/agents/hook-events").status_code == 200
print(json.dumps([name for name in sys.modules if name.startswith("opentelemetry")]))
""".replace("TRACEPARENT", repr("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))


def test_belt_serve_with_tracing_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    # The app belt serve runs (and each --workers process), answering a hook request that
    # carries a traceparent and a platform route, with no OTEL_* variable: nothing is traced.
    policy = str(ROOT / "examples" / "policy.toml")
    done = python("-c", SERVED, policy, BELT_HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_with_a_trace_file_opentelemetry_is_imported(tmp_path: Path) -> None:
    found = loaded_by("sim", "run", str(GUARDED), "--trace", str(tmp_path / "t.jsonl"))
    assert "opentelemetry.sdk.trace" in found


HIDDEN = """
import sys
from importlib.abc import MetaPathFinder

class Refuse(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
sys.argv = ["belt", *sys.argv[1:]]
from belt.cli import main
main()
"""


def test_without_the_extra_belt_says_once_how_to_install_it_and_runs_untraced(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.jsonl"
    done = python(
        "-c", HIDDEN, "sim", "run", str(GUARDED), "--trace", str(trace),
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("pip install 'belt[otel]'") == 1
    assert [line for line in done.stderr.splitlines() if "belt[otel]" in line] == [
        tracing.INSTALL_HINT
    ]
    assert "Traceback" not in done.stderr
    assert not trace.exists()
    assert "hooks: 6 call(s), none failed" in done.stdout  # the run itself went on

    # Asked again in the same process, it says nothing more.
    twice = HIDDEN.split("sys.argv =")[0] + (
        "from belt.outgoing import tracing\n"
        "print(tracing.start(otlp='http://127.0.0.1:9'), tracing.start(trace_file=None))\n"
        "print(tracing.start(otlp='http://127.0.0.1:9'), tracing.on())\n"
    )
    done = python("-c", twice)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False", "False"]
    assert done.stderr == tracing.INSTALL_HINT + "\n"


def test_otlp_must_be_an_http_url() -> None:
    done = in_process("sim", "run", str(GUARDED), "--otlp", "localhost:4318")
    assert done.returncode == 2
    assert "--otlp: 'localhost:4318' is not an http:// or https:// URL" in done.stderr


@pytest.mark.parametrize("command", [("sim", "run", str(GUARDED)), ("test", "examples/tests")])
def test_a_trace_file_that_cannot_be_written_is_refused_before_anything_runs(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    trace = tmp_path / "missing" / "trace.jsonl"
    done = in_process(*command, "--trace", str(trace))
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: --trace {trace}: cannot write it: ")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_standard_resource_variables_name_the_service(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    done = in_process(
        "sim",
        "run",
        str(GUARDED),
        "--trace",
        str(trace),
        OTEL_SERVICE_NAME="my-agent",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci",
    )
    assert done.returncode == 0, done.stderr
    resource = Spans(trace).resources[0]
    assert resource["service.name"] == "my-agent"
    assert resource["deployment.environment"] == "ci"


def test_the_otlp_url_is_a_collectors_base_url() -> None:
    assert tracing.traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert tracing.traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    assert tracing.traces_url("http://h:6006/v1/traces") == "http://h:6006/v1/traces"


# Marked as this test's own: Hypothesis also draws strings found in the code under test (a span
# name such as "execute_tool"), which belt writes to a trace of its own accord.
SECRET_TEXT = (
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=12)
    .filter(lambda text: text.strip() == text and len(set(text)) > 4)
    .map(lambda text: "payload-secret " + text)
)

HANDLER = """
def inject(payload):
    data = payload.get("data") or {}
    text = (data.get("arguments") or {}).get("text", "")
    decision = "deny" if payload["event"] == "agent.tool_call" else "allow"
    return {"decision": decision, "reason": "x" * 300 + text, "inject": {"content": text}}
"""


@settings(max_examples=12)
@given(secret=SECRET_TEXT)
def test_no_payload_text_reaches_a_span(secret: str) -> None:
    from belt.engine.entrypoints import run_scenario

    with _directory() as directory:
        (directory / "handlers.py").write_text(HANDLER)
        scenario = directory / "scenario.json"
        turn = {
            "user": secret,
            "model": [
                {
                    "say": secret,
                    "tool_calls": [
                        {"name": "echo", "arguments": {"text": secret}, "result": secret}
                    ],
                },
                {"say": secret},
            ],
        }
        hooks = [
            {"event": event, "type": "webhook", "handler": "py:handlers.py:inject"}
            for event in ("agent.turn_start", "agent.tool_call", "agent.complete")
        ]
        document = {"agent": {"name": "leaky", "hooks": hooks}, "turns": [turn, turn]}
        scenario.write_text(json.dumps(document))
        trace = directory / "trace.jsonl"
        assert tracing.start(trace_file=trace)
        try:
            run_scenario(scenario=scenario, ephemeral=True)
        finally:
            tracing.shutdown()
        text = trace.read_text()
        spans = Spans(trace)
    assert len(spans.named("belt.hook agent.tool_call")) == 2
    assert len(spans.named("belt.hook agent.turn_start")) == 4
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    assert secret not in text and escaped not in text
    for span in spans.all:
        for found in span["attrs"].values():
            assert secret not in str(found)


@contextmanager
def _directory() -> Iterator[Path]:
    import tempfile

    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def test_a_collector_that_refuses_the_spans_is_one_warning_line() -> None:
    with FakePlatform() as collector:  # a real HTTP server that answers every export 400
        collector.reply("POST", "/v1/traces", 400)
        done = belt("sim", "run", str(GUARDED), "--otlp", collector.url)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "traces not exported" in line]
    assert len(warned) == 1, done.stderr
    assert warned[0].startswith("warning: traces not exported: ")
    assert "Traceback" not in done.stderr


def test_after_one_failed_export_a_command_and_its_workers_drop_their_spans() -> None:
    # Each scenario of belt test flushes its spans in the worker process that ran it: a
    # collector that cannot take them is tried once for the whole command, not once by each
    # process (each try waits for the collector, up to tracing.EXPORT_SECONDS).
    with FakePlatform() as collector:
        collector.reply("POST", "/v1/traces", 400)
        done = belt("test", str(ROOT / "examples" / "tests"), "-j", "1", "--otlp", collector.url)
        exports = [seen for seen in collector.requests if seen.path == "/v1/traces"]
    assert done.returncode == 0, done.stderr
    assert len(exports) == 1, done.stderr
    warned = [line for line in done.stderr.splitlines() if "traces not exported" in line]
    assert len(warned) == 1 and warned[0].endswith("(this process drops its spans from now on)")


PID_HOOK = """
import os
from pathlib import Path

def note(payload):
    (Path(os.environ["PIDS"]) / str(os.getpid())).touch()
    return None
"""


def test_traced_scenarios_share_their_worker_as_untraced_ones_do(tmp_path: Path) -> None:
    # A worker holding a thread belt did not start ends after its scenario; the SDK's export
    # thread is tracing's own, so a traced suite does not fork a worker per scenario.
    suite, pids = tmp_path / "suite", tmp_path / "pids"
    suite.mkdir()
    pids.mkdir()
    (suite / "note.py").write_text(PID_HOOK)
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"py:{suite}/note.py:note"}
    for number in range(4):
        doc = {
            "agent": {"hooks": [hook]},
            "turns": [
                {"user": "go", "model": [{"tool_calls": [{"name": "t", "arguments": {}}]}, {}]}
            ],
            "expect": [{"tool": "t", "status": "completed"}],
        }
        (suite / f"s{number}.json").write_text(json.dumps(doc))
    for traced in (False, True):
        for pid in pids.iterdir():
            pid.unlink()
        trace = ("--trace", str(tmp_path / "t.jsonl")) if traced else ()
        done = belt("test", str(suite), "-j", "1", *trace, PIDS=str(pids))
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(list(pids.iterdir())) == 1, (traced, done.stderr)


def test_a_served_hook_span_counts_its_injection_in_utf8_bytes(tmp_path: Path) -> None:
    # As a delivery's span in the engine counts it: bytes, not characters.
    from belt.server.app import create_app
    from belt.server.deciders import handler_decider
    from belt.store import Store
    from tests.loopback import CLIENT
    from tests.servers import running, turn_start

    reminder, system = "Rappel : rien hors de /tmp/ ✓", "Règle n°2"

    def inject(payload: dict[str, Any]) -> dict[str, Any]:
        return {"inject": {"content": reminder}, "system": system}

    trace = tmp_path / "trace.jsonl"
    assert tracing.start(trace_file=trace)
    try:
        app = create_app(
            store=Store(tmp_path / "state"), decide=handler_decider(inject), sweep_interval=0
        )
        with running(app) as url:
            reply = CLIENT.post(f"{url}/hooks/guard", json=turn_start())
        assert reply.status_code == 200, reply.text
    finally:
        tracing.shutdown()
    served = Spans(trace).one("belt.hook agent.turn_start")
    assert served["attrs"]["belt.hook.handler_type"] == "handler"
    assert served["attrs"]["belt.hook.injection_size"] == len((reminder + system).encode())
