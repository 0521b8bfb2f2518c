"""The pytest plugin ``belt.testing.plugin``: its fixtures, used from test files as a user writes
them."""

from __future__ import annotations

import textwrap

import pytest

# Imported here, before pytester snapshots the modules, so that each inner session does not
# import the engine and the server afresh.
import belt.dialects.platform.agent_loop
import belt.display.render
import belt.server.app
import belt.testing.plugin
import belt.testing.suite

pytest_plugins = ("pytester",)


def make_test(pytester: pytest.Pytester, *parts: str) -> None:
    pytester.makepyfile(test_user="\n".join(textwrap.dedent(part) for part in parts))


def run(pytester: pytest.Pytester) -> pytest.RunResult:
    """Run the user's tests in-process, without the plugins they do not need."""
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


SCENARIO = """
    SCENARIO = {
        "agent": {"hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": HANDLER}]},
        "turns": [{
            "user": "clean up",
            "model": [
                {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/etc/passwd"}}]},
                {"say": "done"},
            ],
        }],
    }
"""


def test_a_callable_handler_in_a_dict_scenario(pytester: pytest.Pytester) -> None:
    make_test(
        pytester,
        """
        def guard(payload):
            if payload["data"]["arguments"]["path"].startswith("/etc/"):
                return {"decision": "deny", "reason": "not /etc"}

        HANDLER = guard
        """,
        SCENARIO,
        """
        def test_guard(belt_scenario):
            run = belt_scenario(SCENARIO)
            assert run.tool_status("delete_file", path="/etc/*") == "failed"
            assert run.decisions("agent.tool_call") == ["deny"]
            assert run.hook_runs("agent.tool_call")[0]["reason"] == "not /etc"
            assert run.state == "completed"
            assert run.states == ["completed"]
            assert run.fired("agent.turn_start") == 2
            assert run.rows(role="user")[0]["text"] == "clean up"
            assert run.interrupts == []
            run.expect(tool="delete_file", decision="deny")
        """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=1)
    # The callables the test lent belt are forgotten once it is over.
    assert vars(belt.testing.plugin.handlers) == {}


def test_a_failing_test_prints_the_transcript(pytester: pytest.Pytester) -> None:
    make_test(
        pytester,
        "HANDLER = 'py:tests.pyhooks:allow'",
        SCENARIO,
        """
        def test_guard(belt_scenario):
            run = belt_scenario(SCENARIO)
            assert run.tool_status("delete_file") == "failed"
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- belt transcript -*",
            "user       clean up",
            '*tool*delete_file({"path": "/etc/passwd"})*completed*',
        ]
    )


def test_an_expectation_that_fails_says_why(pytester: pytest.Pytester) -> None:
    make_test(
        pytester,
        "HANDLER = 'py:tests.pyhooks:allow'",
        SCENARIO,
        """
        def test_guard(belt_scenario):
            run = belt_scenario(SCENARIO)
            run.expect(tool="delete_file", status="failed")
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '*expected { tool = "delete_file", status = "failed" }',
            "*found: no tool call matches every key; the nearest:",
            '*delete_file({"path": "/etc/passwd"}) completed, decision allow',
        ]
    )


def test_a_scenario_file_with_expectations_is_checked(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        guarded="""
        [[agent.hooks]]
        event = "agent.tool_call"
        type = "webhook"
        handler = "https://policy.example.com/hooks"

        [[turns]]
        user = "go"
          [[turns.model]]
          tool_calls = [ { name = "delete_file", arguments = { path = "/x" } } ]
          [[turns.model]]
          say = "done"

        [[expect]]
        tool = "delete_file"
        status = "failed"
        """,
    )
    make_test(
        pytester,
        """
        from pathlib import Path

        def deny(payload):
            return {"decision": "deny"}

        def test_routed(belt_scenario):
            run = belt_scenario(Path(__file__).parent / "guarded.toml",
                                routes={"https://policy.example.com": deny})
            assert run.decisions("agent.tool_call") == ["deny"]

        def test_allowed(belt_scenario):
            belt_scenario(Path(__file__).parent / "guarded.toml",
                          routes={"https://policy.example.com": "py:tests.pyhooks:allow"})
        """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(['*expected { tool = "delete_file", status = "failed" }'])


def test_belt_serve_answers_real_requests_and_journals_them(pytester: pytest.Pytester) -> None:
    policy = pytester.makefile(
        ".toml",
        policy="""
        [[rules]]
        event = "agent.tool_call"
        tool = "delete_file"
        decision = "deny"
        reason = "no deletes"
        """,
    )
    make_test(
        pytester,
        f"""
        import httpx

        def test_served(belt_serve, belt_scenario):
            served = belt_serve(policy={str(policy)!r})
            run = belt_scenario({{
                "agent": {{"hooks": [
                    {{"event": "agent.tool_call", "type": "webhook", "handler": served.hooks_url}}
                ]}},
                "turns": [{{"user": "go", "model": [
                    {{"tool_calls": [{{"name": "delete_file", "arguments": {{}}}}]}},
                    {{"say": "done"}},
                ]}}],
            }})
            assert run.tool_calls("delete_file")[0]["reason"] == "no deletes"
            [record] = served.journal()
            assert record["decision"] == "deny"
            assert httpx.get(served.url + "/healthz").status_code == 200

        def test_handler(belt_serve):
            def decide(payload):  # unannotated: the posted JSON object, as a dict
                return {{"decision": "deny", "reason": payload.get("event")}}
            served = belt_serve(handler=decide)
            reply = httpx.post(served.hooks_url, json={{
                "event": "agent.start", "timestamp": "2026-08-11T14:00:00.000Z",
                "agent_id": "a", "chat_id": "c", "run_id": "r", "turn_count": 0,
            }})
            assert reply.json() == {{"decision": "deny", "reason": "agent.start"}}
        """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=2)


def test_a_scenario_that_cannot_run_fails_the_test(pytester: pytest.Pytester) -> None:
    make_test(
        pytester,
        """
        def test_broken(belt_scenario):
            belt_scenario({"turns": [{"user": "x"}], "agent": {"hooks": [
                {"event": "agent.start", "type": "webhook", "handler": "py:no_such_mod_zz:f"}
            ]}})
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the scenario could not run:*no module named 'no_such_mod_zz'*"])


def test_a_webhook_off_this_machine_fails_the_test_before_it_runs(
    pytester: pytest.Pytester,
) -> None:
    make_test(
        pytester,
        "HANDLER = 'https://hooks.example.invalid/guard'",
        SCENARIO,
        """
        def test_guard(belt_scenario):
            belt_scenario(SCENARIO)

        def test_routed(belt_scenario):
            run = belt_scenario(
                SCENARIO, routes={"https://hooks.example.invalid": "py:tests.pyhooks:deny"}
            )
            assert run.decisions("agent.tool_call") == ["deny"]
        """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the scenario could not run: hook 0 (agent.tool_call): the webhook "
            "https://hooks.example.invalid is not on this machine; serve it here with "
            "--route https://hooks.example.invalid=TARGET*"
        ]
    )


def test_a_failed_expectation_is_reported_as_what_happened_not_as_belt_source(
    pytester: pytest.Pytester,
) -> None:
    make_test(
        pytester,
        "HANDLER = 'py:tests.pyhooks:allow'",
        SCENARIO,
        """
        def test_guard(belt_scenario):
            run = belt_scenario(SCENARIO)
            run.expect(tool="delete_file", status="failed")

        def test_own_expectations(belt_scenario):
            belt_scenario({
                **SCENARIO,
                "expect": [{"tool": "delete_file", "status": "failed"}, {"run_state": "failed"}],
            })
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            '*test_user.py:*: run.expect(tool="delete_file", status="failed")',
            "",
            'expected { tool = "delete_file", status = "failed" }',
            "found: no tool call matches every key; the nearest:",
        ]
    )
    # None of belt's own source, and no traceback through it.
    assert "plugin.py" not in text and "raise " not in text and "def expect" not in text
    # A scenario's own expectations that fail: each said, then one transcript excerpt.
    own = text[text.index("test_own_expectations") :].split("belt transcript")[0]
    assert own.count("expected {") == 2
    assert own.count("transcript:") == 1
    result.stdout.fnmatch_lines(["FAILED test_user.py::test_guard - expected { tool = *"])


DENY_ALL = """
[[agent.hooks]]
event = "agent.tool_call"
type = "webhook"
handler = "py:hooks.py:deny"

[[turns]]
user = "go"
  [[turns.model]]
  tool_calls = [ { name = "delete_file", arguments = { path = "/x" } } ]
  [[turns.model]]
  say = "done"

[[expect]]
tool = "delete_file"
status = "failed"
"""


def test_a_scenario_file_is_read_from_the_test_files_directory(pytester: pytest.Pytester) -> None:
    # A monorepo: the tests, their scenarios and their hooks in a directory of their own, run
    # from the repository's root.
    suite = pytester.mkdir("service") / "tests"
    suite.mkdir()
    (suite / "guarded.toml").write_text(DENY_ALL, encoding="utf-8")
    (suite / "hooks.py").write_text(
        "def deny(payload):\n    return {'decision': 'deny', 'reason': 'no'}\n", encoding="utf-8"
    )
    (suite / "test_user.py").write_text(
        textwrap.dedent(
            """
            import pytest

            def test_by_name(belt_scenario):
                run = belt_scenario("guarded.toml")
                assert run.decisions("agent.tool_call") == ["deny"]

            def test_a_missing_file(belt_scenario):
                belt_scenario("nowhere.toml")
            """
        ),
        encoding="utf-8",
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*belt_scenario: */service/tests/nowhere.toml: no such file"])
    assert "Traceback" not in result.stdout.str()
    assert "belt/reading/inputs.py" not in result.stdout.str()


def test_a_scenario_found_from_the_current_directory_warns_with_the_new_spelling(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "hooks.py").write_text(
        "def deny(payload):\n    return {'decision': 'deny'}\n", encoding="utf-8"
    )
    (pytester.path / "guarded.toml").write_text(DENY_ALL, encoding="utf-8")
    suite = pytester.mkdir("tests")
    (suite / "test_user.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from belt.testing.plugin import PathWarning

            def test_from_the_root(belt_scenario):
                with pytest.warns(PathWarning, match=r'write belt_scenario\\("../guarded.toml"\\)'):
                    run = belt_scenario("guarded.toml")
                assert run.decisions("agent.tool_call") == ["deny"]
            """
        ),
        encoding="utf-8",
    )
    result = run(pytester)
    result.assert_outcomes(passed=1)
