"""Gates settled at the command line, traced (docs/tracing.md, "Gates: a span that ends in another
process"): a run held at a gate with tracing on, then `belt interrupt resolve`, `resolve --all`,
`sweep`, `review` and `auto` in processes of their own with tracing on (the OTLP variables, sent
to a real receiver, or --trace FILE): each settlement is a ``belt.settlement`` span, and each
gate's ``belt.gate`` span is in its run's trace, under the gate hook's span, linked to it. With
tracing off, resolving imports nothing of OpenTelemetry."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

from tests.cli.test_serve import serve_process
from tests.otlp_receiver import Receiver, Span
from tests.terminal import on_terminal
from tests.test_tracing import ROOT, Spans, belt, in_process, loaded_by, untraced_env

GATED = (
    '[agent]\nname = "gated"\n'
    '[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "gate"\ntimeout = 600\n'
    '[[turns]]\nuser = "go"\n'
    '  [[turns.model]]\n  tool_calls = [ { name = "read_file", result = "." } ]\n'
)


def held_run(directory: Path) -> tuple[str, dict[str, Any]]:
    """A run held at its gate, traced to a file (by belt in this process: the settling one is
    another): the gate's id and the gate hook's span."""
    scenario, opened = directory / "gated.toml", directory / "opened.jsonl"
    scenario.write_text(GATED, encoding="utf-8")
    opened.unlink(missing_ok=True)
    held = in_process("sim", "run", str(scenario), "--json", "--trace", str(opened))
    assert held.returncode == 0, held.stderr
    (gate,) = json.loads(held.stdout)["chat"]["pending_interrupts"]
    (hook,) = Spans(opened).named("belt.hook agent.tool_call")
    assert Spans(opened).named("belt.gate") == []  # not settled yet
    return gate["id"], hook


def settled(spans: list[Span], hook: dict[str, Any]) -> Span:
    """The ``belt.gate`` span of the gate ``hook`` opened: in the run's trace, its child."""
    (gate,) = [s for s in spans if s.name == "belt.gate" and s.parent_id == hook["spanId"]]
    assert gate.trace_id == hook["traceId"]
    assert gate.start_ns >= int(hook["startTimeUnixNano"])
    return gate


def linked(spans: list[Span], gate: Span) -> Span:
    """The span ``gate`` links to: the one that settled it."""
    (link,) = gate.links
    return next(s for s in spans if (s.trace_id, s.span_id) == (link.trace_id, link.span_id))


def gate_and_settlement(trace: Path, hook: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``belt.gate`` and ``belt.settlement`` spans of a trace file: the gate in the run's
    trace, the child of ``hook``, linked to the settlement."""
    spans = Spans(trace)
    gate, settlement = spans.one("belt.gate"), spans.one("belt.settlement")
    assert (gate["traceId"], gate["parentSpanId"]) == (hook["traceId"], hook["spanId"])
    assert [link["spanId"] for link in gate["links"]] == [settlement["spanId"]]
    return gate, settlement


def test_a_gate_resolved_at_the_command_line_ends_in_the_runs_trace(
    otlp: Receiver, tmp_path: Path
) -> None:
    gate_id, hook = held_run(tmp_path)
    done = belt("interrupt", "resolve", gate_id, "allow", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the spans are exported before the process ends, without a word
    spans = otlp.wait(lambda got: any(s.name == "belt.gate" for s in got))
    gate = settled(spans, hook)
    assert gate.attributes == {
        "belt.gate.id": gate_id,
        "belt.gate.reason": "hook_gate",
        "belt.gate.status": "resolved",
        "belt.gate.settled_by": "person",
        "belt.gate.resolution": "allow",
    }
    settlement = linked(spans, gate)
    assert (settlement.name, settlement.parent_id) == ("belt.settlement", None)
    # How and through which door; never who (the OS user is on the gate's record only).
    assert settlement.attributes == {"belt.gate.settled_by": "person", "belt.gate.door": "cli"}
    assert gate.end_ns >= settlement.start_ns
    assert settlement.resource["service.name"] == "belt"
    assert getpass.getuser() not in json.dumps([s.attributes for s in spans])


def test_resolve_all_is_one_settlement_and_a_gate_span_in_each_runs_trace(
    otlp: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, first_hook = held_run(tmp_path / "a")
    second, second_hook = held_run(tmp_path / "b")
    assert first_hook["traceId"] != second_hook["traceId"]
    done = belt(
        "interrupt", "resolve", "--all", "deny", "--yes", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url
    )
    assert done.returncode == 0, done.stderr
    spans = otlp.wait(lambda got: len([s for s in got if s.name == "belt.gate"]) == 2)
    gates = [settled(spans, first_hook), settled(spans, second_hook)]
    assert [g.attributes["belt.gate.id"] for g in gates] == [first, second]
    assert {g.attributes["belt.gate.settled_by"] for g in gates} == {"batch"}
    (settlement,) = [s for s in spans if s.name == "belt.settlement"]
    assert settlement.attributes == {"belt.gate.settled_by": "batch", "belt.gate.door": "cli"}
    assert [linked(spans, g) for g in gates] == [settlement, settlement]


def test_a_sweep_is_a_settlement_by_expiry_that_ends_the_gate_span(tmp_path: Path) -> None:
    gate_id, hook = held_run(tmp_path)
    trace = tmp_path / "swept.jsonl"
    done = belt("interrupt", "sweep", "--at", "2100-01-01T00:00:00Z", "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    gate, settlement = gate_and_settlement(trace, hook)
    assert gate["attrs"]["belt.gate.id"] == gate_id
    assert gate["attrs"]["belt.gate.status"] == "expired"
    assert gate["attrs"]["belt.gate.settled_by"] == "expiry"
    assert settlement["attrs"] == {"belt.gate.settled_by": "expiry"}


def test_auto_settles_each_gate_by_its_rule_in_a_settlement_span(tmp_path: Path) -> None:
    gate_id, hook = held_run(tmp_path)
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rules]]\nname = "reads"\ntool = "read_*"\ndecision = "allow"\nreason = "reads"\n',
        encoding="utf-8",
    )
    trace = tmp_path / "auto.jsonl"
    done = belt("interrupt", "auto", "--rules", str(rules), "--once", "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    gate, settlement = gate_and_settlement(trace, hook)
    assert (gate["attrs"]["belt.gate.id"], gate["attrs"]["belt.gate.settled_by"]) == (
        gate_id,
        "rule",
    )
    assert settlement["attrs"] == {"belt.gate.settled_by": "rule"}  # no file, no rule name


def test_review_settles_each_answer_in_a_settlement_span_through_its_door(tmp_path: Path) -> None:
    gate_id, hook = held_run(tmp_path)
    trace = tmp_path / "review.jsonl"
    answers = [b"a\n", b"\n"]  # allow, no data

    def reply(seen: bytes) -> bytes | None:
        return answers.pop(0) if seen.endswith((b"[a/d/s/q] ", b"Enter for none): ")) else None

    env = {**untraced_env(), "TERM": "dumb"}
    with on_terminal(["interrupt", "review", "--trace", str(trace)], env=env, cwd=ROOT) as term:
        assert term.converse(reply) == 0, term.text
    assert answers == []
    gate, settlement = gate_and_settlement(trace, hook)
    assert gate["attrs"]["belt.gate.id"] == gate_id
    assert settlement["attrs"] == {"belt.gate.settled_by": "person", "belt.gate.door": "review"}


def test_resolving_with_tracing_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    gate_id, _ = held_run(tmp_path)
    assert loaded_by("interrupt", "resolve", gate_id, "allow") == []
    # The gate was settled all the same.
    shown = in_process("interrupt", "show", gate_id, "--json")
    assert json.loads(shown.stdout)["status"] == "resolved"


def test_resolving_through_belt_serve_is_one_trace_from_the_command_to_the_request(
    otlp: Receiver, tmp_path: Path
) -> None:
    gate_id, hook = held_run(tmp_path)
    # The server exports a batch every 0.2 s (the SDK's OTEL_BSP_SCHEDULE_DELAY) rather than
    # every 5 s: the gate's span it makes is waited for while it runs.
    served_env = untraced_env(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url, OTEL_BSP_SCHEDULE_DELAY="200")
    with serve_process(env=served_env) as (url, _):
        done = belt(
            "interrupt",
            "resolve",
            gate_id,
            "allow",
            "--api",
            url,
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        )
        assert done.returncode == 0, done.stderr
        spans = otlp.wait(lambda got: any(s.name == "belt.gate" for s in got))
    gate = settled(spans, hook)
    request = linked(spans, gate)  # the server settled it, in the request's span
    assert request.name == "POST /interrupts/{interrupt_id}/resolve"
    settlement = next(s for s in spans if s.span_id == request.parent_id)
    assert (settlement.name, settlement.trace_id) == ("belt.settlement", request.trace_id)
    assert settlement.attributes == {"belt.gate.settled_by": "person", "belt.gate.door": "api"}
