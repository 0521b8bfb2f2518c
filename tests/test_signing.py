import pytest

from belt.errors import InvalidInput
from belt.outgoing.signing import (
    SignatureError,
    secret_key,
    sign,
    signed_headers,
    verify,
)
from tests.vectors import BODY, MSG_ID, SECRET, SIGNATURE, TIMESTAMP


def vector_headers(**changes: str) -> dict[str, str]:
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": SIGNATURE,
    }
    headers.update(changes)
    return headers


def test_sign_matches_the_published_vector() -> None:
    assert sign(SECRET, MSG_ID, TIMESTAMP, BODY) == SIGNATURE


def verified(headers: dict[str, str], body: bytes = BODY, now: int = TIMESTAMP) -> str:
    """The message id ``verify`` vouches for (given the key), once it accepted the headers and
    refused them for a body one byte longer (so an acceptance that checks nothing fails)."""
    verify(SECRET, headers, body, now=now)
    with pytest.raises(SignatureError, match="does not match"):
        verify(SECRET, headers, body + b" ", now=now)
    return verify(secret_key(SECRET), headers, body, now=now)


def test_verify_accepts_the_published_vector() -> None:
    assert verified(vector_headers()) == MSG_ID


def test_verify_reads_headers_in_any_case() -> None:
    headers = {name.upper(): value for name, value in vector_headers().items()}
    assert verified(headers) == MSG_ID


def test_verify_accepts_any_one_matching_signature_of_several() -> None:
    headers = vector_headers(**{"webhook-signature": f"v1,AAAA {SIGNATURE} v2,zzz"})
    assert verified(headers) == MSG_ID


def test_signed_headers_verify_with_the_same_secret() -> None:
    headers = signed_headers(SECRET, b"{}", now=1000)
    assert headers["webhook-id"].startswith("msg_")
    assert headers["webhook-timestamp"] == "1000"
    assert verified(headers, b"{}", now=1000) == headers["webhook-id"]


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        (vector_headers(), b'{"test": 2432232315}', "does not match"),
        (vector_headers(**{"webhook-id": "msg_other"}), BODY, "does not match"),
        (vector_headers(**{"webhook-signature": "v1,bm90IGl0"}), BODY, "does not match"),
        (vector_headers(**{"webhook-signature": "v2,abc"}), BODY, "no v1 signature"),
        (vector_headers(**{"webhook-timestamp": "soon"}), BODY, "not a Unix time"),
        ({"webhook-id": MSG_ID}, BODY, "missing webhook-timestamp, webhook-signature"),
    ],
)
def test_verify_refuses_with_the_reason(headers: dict[str, str], body: bytes, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        verify(SECRET, headers, body, now=TIMESTAMP)


def test_verify_refuses_a_wrong_secret() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify("whsec_" + "QUFBQUFBQUFBQUFBQUFBQQ==", vector_headers(), BODY, now=TIMESTAMP)


def test_verify_allows_five_minutes_of_skew_either_way_and_no_more() -> None:
    verify(SECRET, vector_headers(), BODY, now=TIMESTAMP + 300)
    verify(SECRET, vector_headers(), BODY, now=TIMESTAMP - 300)
    with pytest.raises(SignatureError, match="301 s old"):
        verify(SECRET, vector_headers(), BODY, now=TIMESTAMP + 301)
    with pytest.raises(SignatureError, match="301 s in the future"):
        verify(SECRET, vector_headers(), BODY, now=TIMESTAMP - 301)


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "expected whsec_"),
        ("whsec_not base64!", "not valid base64"),
        ("whsec_", "empty"),
    ],
)
def test_a_malformed_secret_is_invalid_input(secret: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        secret_key(secret)


@pytest.mark.parametrize(
    "stamp",
    [
        "+1614265330",
        "16_14265330",
        "+16_14265330",
        " 1614265330",
        "1614265330 ",
        "１６１４２６５３３０",
    ],
)
def test_a_timestamp_is_ascii_digits_only(stamp: str) -> None:
    # int() reads each of these as the vector's own time, so the signature would match.
    headers = vector_headers(**{"webhook-timestamp": stamp})
    with pytest.raises(SignatureError, match="not a Unix time"):
        verify(SECRET, headers, BODY, now=TIMESTAMP)
