"""``belt check --secret``: near-miss signatures fail a verifier that only looks like one.

Each verifier is a real webhook on port 0; the one that verifies as Standard Webhooks says
passes every case, the others fail the signature check naming the near miss they accept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator, Mapping

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from belt.check.run import signature_cases
from belt.outgoing.signing import SignatureError, secret_key, sign, verify
from tests.cli.runner import belt
from tests.servers import running, turn_start

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = secret_key(SECRET)
PAYLOAD = turn_start()


def _expected(headers: Mapping[str, str], body: bytes) -> str:
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    return base64.b64encode(hmac.new(KEY, content, hashlib.sha256).digest()).decode()


def first_eight(headers: Mapping[str, str], body: bytes) -> bool:
    """Compares only the first 8 characters of each v1 signature."""
    expected = _expected(headers, body)
    entries = headers.get("webhook-signature", "").split()
    return any(e.startswith("v1,") and e[3:11] == expected[:8] for e in entries)


def any_version(headers: Mapping[str, str], body: bytes) -> bool:
    """Takes the part after the comma of any entry whose version starts with v1."""
    expected = _expected(headers, body)
    entries = headers.get("webhook-signature", "").split()
    return any(e.startswith("v1") and e.partition(",")[2] == expected for e in entries)


def shorter_ok(headers: Mapping[str, str], body: bytes) -> bool:
    """Accepts an offered signature that the expected one starts with."""
    expected = _expected(headers, body)
    entries = headers.get("webhook-signature", "").split()
    return any(e.startswith("v1,") and len(e) > 3 and expected.startswith(e[3:]) for e in entries)


def standard(headers: Mapping[str, str], body: bytes) -> bool:
    """Verifies as Standard Webhooks says (belt's own verifier)."""
    try:
        verify(SECRET, headers, body)
    except SignatureError:
        return False
    return True


VERIFIERS: dict[str, Callable[[Mapping[str, str], bytes], bool]] = {
    "first-eight": first_eight,
    "any-version": any_version,
    "shorter-ok": shorter_ok,
    "standard": standard,
}


def app() -> Starlette:
    """One route per verifier: 401 when it refuses the signature, else an empty allow."""

    def route(check: Callable[[Mapping[str, str], bytes], bool]) -> Callable[..., object]:
        async def answer(request: Request) -> Response:
            body = await request.body()
            headers = {name.lower(): value for name, value in request.headers.items()}
            needed = ("webhook-id", "webhook-timestamp", "webhook-signature")
            if not all(headers.get(name) for name in needed):
                return JSONResponse({"error": "unsigned"}, status_code=401)
            # Each keeps the timestamp window: the cases hold the signature comparison to account.
            if not in_window(headers["webhook-timestamp"]):
                return JSONResponse({"error": "stale"}, status_code=401)
            if not check(headers, body):
                return JSONResponse({"error": "bad signature"}, status_code=401)
            return JSONResponse({})

        return answer

    return Starlette(
        routes=[
            Route(f"/{name}", route(check), methods=["POST"]) for name, check in VERIFIERS.items()
        ]
    )


def in_window(stamp: str) -> bool:
    """The timestamp check of ``verify`` alone (5 minutes either way)."""
    return stamp.isdigit() and abs(int(time.time()) - int(stamp)) <= 300


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(app()) as base:
        yield base


def check(url: str, name: str) -> tuple[int, dict[str, object]]:
    result = belt(
        "check", f"{url}/{name}", "--event", "agent.turn_start", "--examples", "2",
        "--seed", "1", "--secret", SECRET, "--json",
    )  # fmt: skip
    return result.exit_code, json.loads(result.stdout)


def signature_result(report: dict[str, object]) -> dict[str, object]:
    checks = report["checks"]
    assert isinstance(checks, list)
    [found] = [c for c in checks if c["check"] == "signature"]
    return dict(found)


@pytest.mark.parametrize(
    ("name", "near_miss"),
    [
        ("first-eight", "the signature with its last byte changed: HTTP 200, expected 4xx"),
        ("any-version", "the signature as a v1a, entry: HTTP 200, expected 4xx"),
        ("shorter-ok", "the first half of the signature: HTTP 200, expected 4xx"),
    ],
)
def test_a_verifier_that_only_looks_like_one_fails_the_signature_check(
    url: str, name: str, near_miss: str
) -> None:
    code, report = check(url, name)
    assert code == 1, report
    signature = signature_result(report)
    assert signature["status"] == "fail"
    failure = signature["failure"]
    assert isinstance(failure, dict)
    assert near_miss in failure["detail"]
    # The valid cases are accepted: only the near misses tell this verifier from a real one.
    assert "a valid signature:" not in failure["detail"]


def test_a_standard_verifier_passes_every_signature_case(url: str) -> None:
    code, report = check(url, "standard")
    assert code == 0, report
    signature = signature_result(report)
    assert signature["status"] == "pass"
    assert signature["cases"] == len(signature_cases(SECRET, PAYLOAD, 1_800_000_000))


def test_each_near_miss_is_the_right_signature_changed_in_one_way() -> None:
    now = 1_800_000_000
    cases = {case.name: case for case in signature_cases(SECRET, PAYLOAD, now)}
    near = [name for name in cases if name.startswith("the ")]
    assert len(near) == 5
    for name in near:
        case = cases[name]
        assert not case.accept
        with pytest.raises(SignatureError):
            verify(SECRET, case.headers, case.body, now=now)
        if name == "the signature of another timestamp":
            # The right signature of the body, made at ``now``, sent under another time.
            assert case.headers["webhook-timestamp"] != str(now)
            right = sign(SECRET, case.headers["webhook-id"], now, case.body)
            assert case.headers["webhook-signature"] == right
    last = cases["the signature with its last byte changed"].headers["webhook-signature"]
    assert len(base64.b64decode(last[3:])) == 32
