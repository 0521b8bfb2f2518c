"""Every validation rule of both dialects, one test (or one case) per rule."""

from __future__ import annotations

from typing import Any

import pytest

from belt.wire.nexus import NexusEvent
from belt.wire.platform import HookHandlerType, InterruptResolution
from belt.wire.validate import (
    check_decision,
    check_nexus_hooks,
    check_nexus_profile,
    check_platform_hooks,
)

WEBHOOK = {"event": "agent.tool_call", "type": "webhook", "handler": "https://example.com/hook"}
GATE = {"event": "agent.tool_call", "type": "gate"}
TASK = {"event": "agent.turn_start", "type": "task", "handler": "my-team/auditor@latest"}
BUILTIN = {"event": "agent.turn_start", "type": "builtin", "handler": "belt:suggest"}
STOP = {"tool": "execution_check", "timeout_ms": 30000, "max_continuations": 2}
TURN_START = {"tool": "execution_check", "timeout_ms": 30000}


def hook(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``base`` with keys changed; a value of ... removes the key."""
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not ...}


def platform_problems(*hooks: Any) -> list[str]:
    findings, models = check_platform_hooks(list(hooks))
    assert bool(models) != bool(findings.problems)
    return findings.problems


def nexus_problems(raw: Any) -> list[str]:
    findings, model = check_nexus_hooks(raw)
    assert (model is None) == bool(findings.problems)
    return findings.problems


# inference.sh: valid declarations -------------------------------------------------------------


@pytest.mark.parametrize(
    "declaration",
    [
        WEBHOOK,
        hook(WEBHOOK, handler="http://127.0.0.1:8787/hooks/tool-call"),
        hook(WEBHOOK, timeout=300, **{"async": True}),
        GATE,
        hook(GATE, event="agent.start", timeout=86400, default_resolution="deny"),
        hook(GATE, event="agent.turn_start", default_resolution="allow"),
        hook(GATE, **{"async": False}),
        TASK,
        hook(TASK, handler="my-team/auditor"),
        hook(TASK, handler="my-team/auditor@1.2.0", timeout=300),
        BUILTIN,
        {"event": "agent.complete", "type": "builtin", "handler": "belt:extract"},
        {"event": "agent.pre_compact", "type": "builtin", "handler": "belt:extract", "timeout": 1},
    ],
    ids=lambda d: f"{d['type']}-{d['event']}",
)
def test_valid_platform_hook_has_no_problems(declaration: dict[str, Any]) -> None:
    findings, models = check_platform_hooks([declaration])
    assert findings.problems == []
    assert len(models) == 1
    assert models[0].to_wire() == {k: v for k, v in declaration.items() if v is not False}


# inference.sh: one rule per case ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        pytest.param(
            hook(WEBHOOK, event="agent.finish"),
            "hooks[0].event: 'agent.finish' is not a lifecycle event (expected one of agent.start,",
            id="event-not-in-catalogue",
        ),
        pytest.param(hook(WEBHOOK, event=...), "hooks[0].event: is required", id="event-missing"),
        pytest.param(
            hook(WEBHOOK, event=3), "hooks[0].event: 3 is not a lifecycle event", id="event-number"
        ),
        pytest.param(
            hook(WEBHOOK, type="cron"),
            "hooks[0].type: 'cron' is not a handler type (expected one of webhook, task, gate, "
            "builtin)",
            id="type-not-one-of-four",
        ),
        pytest.param(hook(WEBHOOK, type=...), "hooks[0].type: is required", id="type-missing"),
        pytest.param(
            hook(WEBHOOK, handler="ftp://example.com/hook"),
            "hooks[0].handler: must be an absolute http:// or https:// URL",
            id="webhook-not-http",
        ),
        pytest.param(
            hook(WEBHOOK, handler="/hooks/tool-call"),
            "hooks[0].handler: must be an absolute http:// or https:// URL",
            id="webhook-relative",
        ),
        pytest.param(
            hook(WEBHOOK, handler="https:///hooks"),
            "hooks[0].handler: must be an absolute URL with a host",
            id="webhook-no-host",
        ),
        pytest.param(
            hook(WEBHOOK, handler="https://example.com/a hook"),
            "hooks[0].handler: must be a URL without spaces, control characters or lone surrogates",
            id="webhook-space",
        ),
        pytest.param(
            hook(WEBHOOK, handler=...),
            "hooks[0].handler: is required for a webhook hook (a webhook URL)",
            id="webhook-handler-missing",
        ),
        pytest.param(
            hook(WEBHOOK, handler=["https://example.com"]),
            "hooks[0].handler: must be a string, got an array",
            id="handler-not-string",
        ),
        pytest.param(
            hook(TASK, handler="auditor"),
            "hooks[0].handler: 'auditor' is not an agent ref (namespace/name[@version])",
            id="task-ref-without-namespace",
        ),
        pytest.param(
            hook(TASK, handler="my-team/auditor@"),
            "hooks[0].handler: 'my-team/auditor@' is not an agent ref",
            id="task-ref-empty-version",
        ),
        pytest.param(
            hook(TASK, handler="a/b/c"),
            "hooks[0].handler: 'a/b/c' is not an agent ref",
            id="task-ref-three-parts",
        ),
        pytest.param(
            hook(TASK, handler=...),
            "hooks[0].handler: is required for a task hook (an agent ref)",
            id="task-handler-missing",
        ),
        pytest.param(
            hook(BUILTIN, handler="belt:remember"),
            "hooks[0].handler: 'belt:remember' is not a builtin (expected one of belt:suggest, "
            "belt:extract)",
            id="builtin-unknown",
        ),
        pytest.param(
            hook(BUILTIN, event="agent.complete"),
            "hooks[0].event: belt:suggest cannot attach to agent.complete "
            "(allowed: agent.turn_start)",
            id="builtin-suggest-wrong-event",
        ),
        pytest.param(
            hook(BUILTIN, handler="belt:extract"),
            "hooks[0].event: belt:extract cannot attach to agent.turn_start "
            "(allowed: agent.complete, agent.pre_compact)",
            id="builtin-extract-wrong-event",
        ),
        pytest.param(
            hook(GATE, handler="https://example.com/hook"),
            "hooks[0].handler: a gate has no handler; remove it",
            id="gate-with-handler",
        ),
        pytest.param(
            hook(GATE, event="agent.tool_result"),
            "hooks[0].event: a gate cannot attach to agent.tool_result (gates attach to "
            "agent.start, agent.turn_start, agent.tool_call)",
            id="gate-on-observe-only-event",
        ),
        pytest.param(
            hook(GATE, event="agent.pre_compact"),
            "hooks[0].event: a gate cannot attach to agent.pre_compact",
            id="gate-on-pre-compact",
        ),
        pytest.param(
            hook(WEBHOOK, timeout=1.5),
            "hooks[0].timeout: must be a whole number of seconds, got a number",
            id="timeout-fraction",
        ),
        pytest.param(
            hook(WEBHOOK, timeout="10"),
            "hooks[0].timeout: must be a whole number of seconds, got a string",
            id="timeout-string",
        ),
        pytest.param(
            hook(WEBHOOK, timeout=True),
            "hooks[0].timeout: must be a whole number of seconds, got a boolean",
            id="timeout-boolean",
        ),
        pytest.param(
            hook(WEBHOOK, timeout=0),
            "hooks[0].timeout: 0 must be at least 1 second",
            id="timeout-zero",
        ),
        pytest.param(
            hook(WEBHOOK, timeout=301),
            "hooks[0].timeout: 301 is above the webhook maximum of 300",
            id="timeout-webhook-max",
        ),
        pytest.param(
            hook(GATE, timeout=86401),
            "hooks[0].timeout: 86401 is above the gate maximum of 86400",
            id="timeout-gate-max",
        ),
        pytest.param(
            hook(TASK, timeout=301),
            "hooks[0].timeout: 301 is above the task maximum of 300",
            id="timeout-task-as-webhook",
        ),
        pytest.param(
            hook(BUILTIN, timeout=600),
            "hooks[0].timeout: 600 is above the builtin maximum of 300",
            id="timeout-builtin-as-webhook",
        ),
        pytest.param(
            hook(WEBHOOK, default_resolution="deny"),
            "hooks[0].default_resolution: is only allowed on gate hooks",
            id="default-resolution-not-gate",
        ),
        pytest.param(
            hook(GATE, default_resolution="maybe"),
            "hooks[0].default_resolution: 'maybe' must be 'allow' or 'deny'",
            id="default-resolution-value",
        ),
        pytest.param(
            hook(WEBHOOK, **{"async": "yes"}),
            "hooks[0].async: must be true or false, got a string",
            id="async-not-boolean",
        ),
        pytest.param(
            hook(WEBHOOK, retries=3),
            "hooks[0].retries: unknown key (allowed: event, type, handler, async, timeout, "
            "default_resolution)",
            id="unknown-key",
        ),
        pytest.param(
            hook(WEBHOOK, async_=True),
            "hooks[0].async_: unknown key",
            id="python-spelling-of-async",
        ),
    ],
)
def test_platform_rule(declaration: dict[str, Any], expected: str) -> None:
    problems = platform_problems(declaration)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected)


def test_idle_event_passes_with_a_warning() -> None:
    findings, models = check_platform_hooks([hook(WEBHOOK, event="agent.idle")])
    assert findings.problems == []
    assert findings.warnings == [
        "hooks[0].event: agent.idle is defined but never emitted; this hook never fires"
    ]
    assert models[0].event == "agent.idle"


def test_async_on_a_gate_is_accepted_ignored_and_warned_about() -> None:
    findings, models = check_platform_hooks([hook(GATE, **{"async": True})])
    assert findings.problems == []
    assert findings.warnings == [
        "hooks[0].async: async is not used for gate hooks (a gate always suspends the run); "
        "it is ignored"
    ]
    (gate,) = models
    assert gate.async_ is True and gate.runs_async is False
    assert gate.to_wire()["async"] is True  # the declaration is kept as written
    webhook_models = check_platform_hooks([hook(WEBHOOK, **{"async": True})])[1]
    assert webhook_models[0].runs_async is True


def test_hook_that_is_not_an_object() -> None:
    assert platform_problems("agent.tool_call") == ["hooks[0]: expected an object, got a string"]


def test_hooks_that_are_not_an_array() -> None:
    findings, _ = check_platform_hooks({"event": "agent.start"})
    assert findings.problems == ["hooks: expected an array of hooks, got an object"]


def test_every_problem_of_every_hook_is_reported_with_its_index() -> None:
    problems = platform_problems(
        WEBHOOK,
        hook(GATE, event="agent.complete", **{"async": True}),
        hook(WEBHOOK, timeout=400, color="red"),
    )
    assert problems == [
        "hooks[1].event: a gate cannot attach to agent.complete (gates attach to agent.start, "
        "agent.turn_start, agent.tool_call)",
        "hooks[2].color: unknown key (allowed: event, type, handler, async, timeout, "
        "default_resolution)",
        "hooks[2].timeout: 400 is above the webhook maximum of 300",
    ]


@pytest.mark.parametrize(
    ("declaration", "timeout"),
    [(WEBHOOK, 30), (TASK, 30), (BUILTIN, 30), (GATE, 300), (hook(GATE, timeout=5), 5)],
)
def test_timeout_defaults(declaration: dict[str, Any], timeout: int) -> None:
    _, models = check_platform_hooks([declaration])
    assert models[0].effective_timeout() == timeout


def test_gate_default_resolution_defaults_to_allow() -> None:
    _, models = check_platform_hooks([GATE, hook(GATE, default_resolution="deny")])
    assert models[0].type == HookHandlerType.GATE
    assert models[0].effective_default_resolution() == InterruptResolution.ALLOW
    assert models[1].effective_default_resolution() == InterruptResolution.DENY


# Nexus lifecycle_hooks ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [None, {}], ids=["null", "empty"])
def test_nexus_null_or_empty_declares_none(raw: Any) -> None:
    findings, model = check_nexus_hooks(raw)
    assert findings.problems == []
    assert model is not None
    assert model.declared() == {}


def test_nexus_declares_each_boundary_in_spec_order() -> None:
    raw = {"stop": STOP, "turn_start": TURN_START, "post_compact": TURN_START}
    findings, model = check_nexus_hooks(raw)
    assert findings.problems == []
    assert model is not None
    assert list(model.declared()) == [
        NexusEvent.TURN_START,
        NexusEvent.POST_COMPACT,
        NexusEvent.STOP,
    ]
    assert model.to_wire() == raw


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"agent.start": TURN_START},
            "lifecycle_hooks.agent.start: unknown event (allowed: turn_start, pre_compact, "
            "post_compact, stop)",
            id="unknown-event",
        ),
        pytest.param(
            {"turn_start": {"timeout_ms": 1000}},
            "lifecycle_hooks.turn_start.tool: is required (the executor tool to run)",
            id="tool-missing",
        ),
        pytest.param(
            {"turn_start": {"tool": "   ", "timeout_ms": 1000}},
            "lifecycle_hooks.turn_start.tool: must be a nonblank string",
            id="tool-blank",
        ),
        pytest.param(
            {"turn_start": {"tool": 7, "timeout_ms": 1000}},
            "lifecycle_hooks.turn_start.tool: must be a nonblank string",
            id="tool-not-string",
        ),
        pytest.param(
            {"pre_compact": {"tool": "t"}},
            "lifecycle_hooks.pre_compact.timeout_ms: is required (1 through 300000)",
            id="timeout-missing",
        ),
        pytest.param(
            {"pre_compact": {"tool": "t", "timeout_ms": 0}},
            "lifecycle_hooks.pre_compact.timeout_ms: 0 must be a whole number 1 through 300000",
            id="timeout-zero",
        ),
        pytest.param(
            {"pre_compact": {"tool": "t", "timeout_ms": 300001}},
            "lifecycle_hooks.pre_compact.timeout_ms: 300001 must be a whole number 1 through "
            "300000",
            id="timeout-above-max",
        ),
        pytest.param(
            {"pre_compact": {"tool": "t", "timeout_ms": 1.5}},
            "lifecycle_hooks.pre_compact.timeout_ms: 1.5 must be a whole number",
            id="timeout-fraction",
        ),
        pytest.param(
            {"stop": {"tool": "t", "timeout_ms": 1000}},
            "lifecycle_hooks.stop.max_continuations: is required on stop (0 through 20)",
            id="stop-without-max-continuations",
        ),
        pytest.param(
            {"stop": {**STOP, "max_continuations": 21}},
            "lifecycle_hooks.stop.max_continuations: 21 must be a whole number 0 through 20",
            id="max-continuations-above-20",
        ),
        pytest.param(
            {"stop": {**STOP, "max_continuations": -1}},
            "lifecycle_hooks.stop.max_continuations: -1 must be a whole number 0 through 20",
            id="max-continuations-negative",
        ),
        pytest.param(
            {"post_compact": {**TURN_START, "max_continuations": 1}},
            "lifecycle_hooks.post_compact.max_continuations: is only allowed on stop",
            id="max-continuations-not-on-stop",
        ),
        pytest.param(
            {"turn_start": {**TURN_START, "command": "./check.sh"}},
            "lifecycle_hooks.turn_start.command: unknown key (allowed: tool, timeout_ms, "
            "max_continuations)",
            id="unknown-key",
        ),
        pytest.param(
            {"turn_start": "execution_check"},
            "lifecycle_hooks.turn_start: expected an object, got a string",
            id="entry-not-object",
        ),
        pytest.param(
            ["turn_start"],
            "lifecycle_hooks: expected an object or null, got an array",
            id="not-an-object",
        ),
    ],
)
def test_nexus_rule(raw: Any, expected: str) -> None:
    problems = nexus_problems(raw)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected)


@pytest.mark.parametrize(("timeout_ms", "continuations"), [(1, 0), (300000, 20)])
def test_nexus_bounds_are_inclusive(timeout_ms: int, continuations: int) -> None:
    raw = {"stop": {"tool": "t", "timeout_ms": timeout_ms, "max_continuations": continuations}}
    assert nexus_problems(raw) == []


def test_profile_with_hooks_must_declare_approval_mode() -> None:
    findings, model = check_nexus_profile({"lifecycle_hooks": {"turn_start": TURN_START}})
    assert model is None
    assert findings.problems == [
        "approval_mode: is required when the configuration declares lifecycle hooks"
    ]


def test_profile_with_hooks_and_approval_mode_passes() -> None:
    findings, model = check_nexus_profile(
        {"approval_mode": "ask", "lifecycle_hooks": {"turn_start": TURN_START}, "tools": []}
    )
    assert findings.problems == []
    assert model is not None
    assert list(model.declared()) == [NexusEvent.TURN_START]


@pytest.mark.parametrize("hooks", [None, {}])
def test_profile_without_hooks_needs_no_approval_mode(hooks: Any) -> None:
    findings, model = check_nexus_profile({"lifecycle_hooks": hooks, "tools": []})
    assert findings.problems == []
    assert model is not None


# Nexus hook task decisions --------------------------------------------------------------------


@pytest.mark.parametrize("event", list(NexusEvent))
def test_acknowledge_is_valid_for_every_event(event: NexusEvent) -> None:
    findings, result = check_decision({"continue": False}, event)
    assert findings.problems == []
    assert result is not None
    assert result.continue_ is False


def test_stop_may_ask_to_continue_with_feedback() -> None:
    findings, result = check_decision({"continue": True, "feedback": "Run the tests."}, "stop")
    assert findings.problems == []
    assert result is not None
    assert (result.continue_, result.feedback) == (True, "Run the tests.")


@pytest.mark.parametrize("event", ["turn_start", "pre_compact", "post_compact"])
def test_only_stop_may_continue(event: str) -> None:
    findings, _ = check_decision({"continue": True, "feedback": "more"}, event)
    assert findings.problems == [
        f"structured_content.continue: only stop may ask to continue; {event} acknowledges"
    ]


def test_feedback_of_exactly_16_kib_passes() -> None:
    findings, _ = check_decision({"continue": True, "feedback": "x" * 16384}, "stop")
    assert findings.problems == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"continue": True},
            "structured_content.feedback: is required when continue is true",
            id="feedback-missing",
        ),
        pytest.param(
            {"continue": True, "feedback": " \n\t"},
            "structured_content.feedback: must be nonblank",
            id="feedback-blank",
        ),
        pytest.param(
            {"continue": True, "feedback": 42},
            "structured_content.feedback: must be a string, got an integer",
            id="feedback-not-string",
        ),
        pytest.param(
            {"continue": True, "feedback": "x" * 16385},
            "structured_content.feedback: is 16385 bytes, above the limit of 16384 (16 KiB)",
            id="feedback-over-16-kib",
        ),
        pytest.param(
            # 8193 characters, but 16386 UTF-8 bytes: the limit counts bytes.
            {"continue": True, "feedback": "é" * 8193},
            "structured_content.feedback: is 16386 bytes, above the limit of 16384 (16 KiB)",
            id="feedback-counts-utf8-bytes",
        ),
        pytest.param(
            {"continue": True, "feedback": "run\x00the tests"},
            "structured_content.feedback: must not contain NUL",
            id="feedback-nul",
        ),
        pytest.param(
            {"continue": False, "reason": "done"},
            "structured_content.reason: additional result fields are refused",
            id="additional-field",
        ),
        pytest.param(
            {"continue": False, "feedback": "fine"},
            "structured_content.feedback: is only allowed with continue: true",
            id="feedback-with-acknowledge",
        ),
        pytest.param(
            {}, "structured_content.continue: is required (true or false)", id="continue-missing"
        ),
        pytest.param(
            {"continue": "false"},
            "structured_content.continue: must be true or false, got a string",
            id="continue-not-boolean",
        ),
        pytest.param(
            [True], "structured_content: expected an object, got an array", id="not-an-object"
        ),
    ],
)
def test_decision_rule(raw: Any, expected: str) -> None:
    findings, result = check_decision(raw, "stop")
    assert result is None
    assert findings.problems == [expected]
