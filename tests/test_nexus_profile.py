"""The profile API of `belt serve` and `rho extensions configure --api`, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from belt.cli.rho import app as rho_app
from belt.errors import ExitCode
from belt.records.profile import read_profile
from belt.server.app import create_app
from belt.store import open_store
from tests.loopback import CLIENT
from tests.servers import REFUSED, running

EXAMPLES = Path(__file__).parent.parent / "examples"
PROFILE = json.loads((EXAMPLES / "nexus-profile.json").read_text())
PATH = "/agent_api/v1/profile/configuration"
STOP = {"stop": {"tool": "verify", "timeout_ms": 5000, "max_continuations": 1}}
JSON = "application/json"


@pytest.fixture
def api() -> Iterator[str]:
    with running(create_app(store=open_store(), sweep_interval=0)) as url:
        yield url


def put(url: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return CLIENT.put(url + PATH, content=content, headers={"content-type": JSON, **headers})


def test_get_before_any_put_is_an_empty_declaration(api: str) -> None:
    response = CLIENT.get(api + PATH)
    assert response.status_code == 200
    assert response.json() == {}
    assert response.headers["x-belt-profile-revision"] == "0"


def test_put_stores_the_whole_declaration_and_get_reads_it_back(api: str) -> None:
    declaration = {**PROFILE, "plugins": {"rho.memory": {"configuration": {}}}}
    response = put(api, declaration)
    assert response.status_code == 200
    assert response.json() == declaration
    assert CLIENT.get(api + PATH).json() == declaration
    record = read_profile(open_store())
    assert (record["configuration"], record["revision"]) == (declaration, 1)
    assert put(api, {"approval_mode": "ask"}).headers["x-belt-profile-revision"] == "2"
    assert CLIENT.get(api + PATH).json() == {"approval_mode": "ask"}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            {"approval_mode": "ask", "lifecycle_hooks": {"stop": {"tool": "v", "timeout_ms": 5}}},
            "lifecycle_hooks.stop.max_continuations: is required on stop (0 through 20)",
        ),
        (
            {"lifecycle_hooks": STOP},
            "approval_mode: is required when the configuration declares lifecycle hooks",
        ),
        (
            {
                "approval_mode": "ask",
                "lifecycle_hooks": {"turn_start": {"tool": "c", "timeout_ms": 0}},
            },
            "lifecycle_hooks.turn_start.timeout_ms: 0 must be a whole number 1 through 300000",
        ),
        ([1, 2], "configuration: expected an object, got an array"),
        ("{not json", "the body is not JSON"),
    ],
    ids=["no-max-continuations", "no-approval-mode", "timeout-0", "array", "not-json"],
)
def test_a_bad_declaration_is_refused_with_problem_json_naming_the_path(
    api: str, body: Any, detail: str
) -> None:
    put(api, PROFILE)
    response = put(api, body)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 422
    assert problem["detail"].startswith(detail)
    assert CLIENT.get(api + PATH).json() == PROFILE


def test_the_profile_api_needs_the_bearer_token_when_serve_has_one() -> None:
    with running(create_app(store=open_store(), sweep_interval=0, token="t0k")) as url:
        assert put(url, PROFILE).status_code == 401
        assert put(url, PROFILE, Authorization="Bearer t0k").status_code == 200


def test_a_scenario_without_a_profile_runs_the_profile_put_on_serve(
    api: str, tmp_path: Path
) -> None:
    from belt.engine.entrypoints import run_scenario

    assert put(api, {"approval_mode": "auto", "lifecycle_hooks": STOP}).status_code == 200
    path = tmp_path / "s.toml"
    path.write_text('dialect = "nexus"\n[[turns]]\nuser = "hi"\n[[turns.model]]\nsay = "ok"\n')
    report, _ = run_scenario(scenario=path, executors=["verify=py:tests.nexus_tools:acknowledge"])
    (run,) = report["runs"]
    assert run["hooks"] == STOP
    assert run["profile"] == {"source": "store", "revision": 1}
    assert run["state"] == "completed"


# -- rho extensions configure --api -----------------------------------------------------------


def rho(*args: str, input: str | None = None) -> Any:
    result = CliRunner().invoke(
        rho_app, ["extensions", "configure", "rho.lifecycle_hooks", *args], input=input
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_rho_configure_api_writes_the_hooks_into_the_served_profile(
    api: str, belt_home: Path
) -> None:
    put(api, {"approval_mode": "auto", "model": "m-1"})
    result = rho("--api", api, "--json", input=json.dumps(STOP))
    assert result.exit_code == 0, result.stderr
    assert result.stdout and json.loads(result.stdout) == {
        "extension": "rho.lifecycle_hooks",
        "api": api.removeprefix("http://"),
        "configuration": STOP,
    }
    assert CLIENT.get(api + PATH).json() == {
        "approval_mode": "auto",
        "model": "m-1",
        "lifecycle_hooks": STOP,
    }
    assert not (belt_home / "rho" / "config.json").exists()


def test_rho_configure_api_shows_what_the_server_refused(api: str) -> None:
    result = rho("--api", api, input=json.dumps(STOP))
    assert result.exit_code == ExitCode.FAILURE  # a 422 answer (docs/cli.md's table)
    assert "refused the profile: approval_mode: is required" in result.stderr
    assert result.stderr.rstrip().endswith("(HTTP 422)")
    assert CLIENT.get(api + PATH).json() == {}


def test_rho_configure_api_checks_the_object_before_sending_it(api: str) -> None:
    result = rho("--api", api, input='{"stop": {"tool": "v"}}')
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "stop.timeout_ms: is required" in result.stderr


def test_rho_configure_api_unreachable_exits_6() -> None:
    result = rho("--api", f"http://{REFUSED}", input=json.dumps(STOP))
    assert result.exit_code == ExitCode.UNREACHABLE
    assert f"cannot reach http://{REFUSED}/agent_api/v1/profile/configuration" in result.stderr
