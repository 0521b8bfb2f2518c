"""Client of the platform's HTTP API (or of ``belt serve``), the routes of spec/WIRE.md.

Any answer but the ``{"data": ...}`` envelope becomes one line naming the URL and status, with
``remote_error``'s exit code; the bearer key never leaves the request headers. Only the commands
given ``--api`` import this module, and with it httpx (start-up).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast
from urllib.parse import urljoin, urlsplit

import httpx

from belt.deliveries.effects import url_host
from belt.display.text import short
from belt.errors import BeltError, InvalidInput, NotFound, Unreachable, UsageError, remote_error
from belt.outgoing.transport import TooLarge, call, read
from belt.reading.strictjson import StrictJSONError, decode
from belt.records.interrupts import BATCH_PATH, BatchResult, Settlement, happened_at
from belt.records.profile import PROFILE_PATH
from belt.store import check_id
from belt.wire.dto import InterruptJSON, WatchEvent
from belt.wire.enums import InterruptStatus
from belt.wire.validate import check_webhook_url

KEY_ENV = ("INFSH_API_KEY", "INFERENCE_API_KEY")
DEFAULT_TIMEOUT = 10.0
MAX_ANSWER_BYTES = 16 * 1024 * 1024
KEY_HINT = "check the API key (--api-key, INFSH_API_KEY or INFERENCE_API_KEY)"
REACH_HINT = "check --api (or BELT_API_URL) and that the platform or `belt serve` is running"
REDIRECT_HINT = "belt does not follow redirects: give --api the URL the platform answers at"
FULL_IDS = (
    "with --api give the whole interrupt id: the platform takes full ids only "
    "(short ids and prefixes are matched in the local store)"
)
_DETAIL_LIMIT = 300


def runs_needed(command: str, hint: str | None = None) -> UsageError:
    """--api without --run: the platform API lists interrupts per run."""
    return UsageError(
        f"with --api, {command} needs --run and a run's whole id (repeatable): the platform "
        "API lists interrupts per run",
        hint=hint,
    )


class Platform:
    """A connection to one platform API; use as a context manager."""

    def __init__(
        self, base_url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        if (reason := check_webhook_url(base_url)) is not None:
            if reason.startswith("must be an absolute"):
                reason = "must be an http:// or https:// URL with a host"
            raise InvalidInput(
                f"--api {reason}",
                hint="for example --api https://api.inference.sh or --api http://127.0.0.1:8787",
            )
        self.host = url_host(base_url)
        self.timeout = timeout
        self._atomic: bool | None = None
        self._answered: int | None = None  # the last answer's status, for ``_shape``
        from_env = (os.environ[name] for name in KEY_ENV if os.environ.get(name))
        self._key = api_key if api_key is not None else next(from_env, None)
        self._headers = {"Accept": "application/json"}  # this platform's alone
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        try:
            self._base = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            raise InvalidInput(f"--api is not a valid URL ({exc})") from None

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to close: the connections are the process's (``belt.outgoing.transport``)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        envelope: bool = True,
        what: str | None = None,
    ) -> Any:
        """Send one request; the unwrapped ``data`` (``envelope=False``: the body as it is)."""
        url = self.shown_url(path)
        head: httpx.Response | None = None
        self._answered = None
        try:
            with call(
                method,
                self._url(path),
                headers=self._headers,
                timeout=self.timeout,
                **({} if body is None else {"json": body}),
            ) as response:
                head = response
                raw = read(response, MAX_ANSWER_BYTES)
        except (httpx.TransportError, TooLarge) as exc:
            raise self._broken(url, head, exc) from None
        self._answered = response.status_code
        if response.is_success:
            return self._unwrap(url, response, raw, envelope)
        if response.is_redirect:
            raise self._redirect(url, response)
        raise self._problem(url, response, raw, what)

    def _broken(self, url: str, head: httpx.Response | None, exc: Exception) -> BeltError:
        """The error of a call that failed before its whole answer (``head``, if any) was read."""
        status = None if head is None else head.status_code
        if isinstance(exc, TooLarge):
            return remote_error(status, f"{url} answered HTTP {status}: {exc}")
        within = f"within {self.timeout:g}s"
        if isinstance(exc, httpx.TimeoutException):
            if head is None:
                return remote_error(None, f"{url} did not answer {within}", hint=REACH_HINT)
            body = f"{url} answered HTTP {status}, but its body did not all arrive {within}"
            return remote_error(status, body)
        reason = self._redact(str(exc)) or type(exc).__name__
        if head is not None:
            return remote_error(status, f"{url} answered HTTP {status}, then broke off: {reason}")
        if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError):
            # Connected and sent: the server failed on the request (exit 1, not 6).
            closed = not isinstance(exc, httpx.RemoteProtocolError) or "disconnected" in reason
            what = "closed the connection without answering" if closed else "answered"
            hint = "the server took the request and failed on it: its log says why"
            return BeltError(f"{url} {what}: {reason}", hint=hint)
        return remote_error(None, f"cannot reach {url}: {reason}", hint=REACH_HINT)

    def shown_url(self, path: str) -> str:
        """The URL of a request to ``path`` as a message shows it (no credentials, no query)."""
        base = self._base
        return f"{base.scheme}://{url_host(str(base))}{base.path.rstrip('/')}{path}"

    def _url(self, path: str) -> httpx.URL:
        """The URL of a request to ``path`` (which starts with ``/``) under the base URL."""
        return self._base.copy_with(raw_path=self._base.raw_path.rstrip(b"/") + path.encode())

    def list_interrupts(self, *, run_id: str, include_settled: bool = False) -> list[InterruptJSON]:
        """``GET /agent-runs/{run_id}/interrupts``: the pending ones, or all."""
        path = f"/agent-runs/{check_id(run_id, what='run id')}/interrupts"
        data = self.request("GET", path)
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise self._shape(path, "something other than a list of interrupts")
        items = cast(list[InterruptJSON], data)
        return [i for i in items if include_settled or i.get("status") == InterruptStatus.PENDING]

    def find_interrupts(
        self,
        *,
        run_id: str | None = None,
        chat_id: str | None = None,
        reason: str | None = None,
        include_settled: bool = False,
    ) -> list[tuple[InterruptJSON, str | None]]:
        """A run's interrupts as the platform lists them, filtered here (expiry unknown)."""
        if run_id is None:
            raise UsageError(
                "with --api, list needs a run's id: the platform API lists interrupts per run",
                hint="give the run's whole id as the argument; every run's pending interrupts "
                "are listed from the local store, without --api",
            )
        return [
            (item, None)
            for item in self.list_interrupts(run_id=run_id, include_settled=include_settled)
            if (chat_id is None or item.get("chat_id") == chat_id)
            and (reason is None or item.get("reason") == reason)
        ]

    def get_interrupt(self, *, interrupt_id: str, run_id: str) -> InterruptJSON:
        """One interrupt, found in its run's list (the API has no route for one interrupt)."""
        check_id(interrupt_id, what="interrupt id")
        items = self.list_interrupts(run_id=run_id, include_settled=True)
        for item in items:
            if item.get("id") == interrupt_id:
                return item
        named = [
            str(item.get("id"))
            for item in items
            if str(item.get("id")).startswith(interrupt_id) or item.get("short_id") == interrupt_id
        ]
        hint = f"{FULL_IDS}; did you mean {', '.join(named[:3])}?" if named else FULL_IDS
        raise NotFound(f"no interrupt {interrupt_id} on run {run_id} at {self.host}", hint=hint)

    def show_interrupt(
        self, *, interrupt_id: str, run_id: str | None
    ) -> tuple[InterruptJSON, str | None]:
        """One interrupt, found in its run's list; the API does not say how it expires."""
        if not run_id:
            raise UsageError(
                "with --api, show needs --run and the whole id of the interrupt's run",
                hint="the platform API has no route for one interrupt; belt finds it in the "
                "run's list (GET /agent-runs/{run_id}/interrupts)",
            )
        return self.get_interrupt(interrupt_id=interrupt_id, run_id=run_id), None

    def resolve_interrupt(
        self,
        *,
        interrupt_id: str,
        decision: str,
        data: Any = None,
        door: str = "cli",
        by: Settlement | None = None,
    ) -> InterruptJSON:
        """``POST /interrupts/{id}/resolve``; ``by`` goes to ``belt serve`` only."""
        body: dict[str, object] = {"decision": decision, **({} if data is None else {"data": data})}
        path = f"/interrupts/{check_id(interrupt_id, what='interrupt id')}/resolve"
        if by is not None and self.batch_atomic():
            path, body["by"] = f"/_belt{path}", by
        try:
            result = self.request("POST", path, body=body)
        except NotFound as exc:
            raise remote_error(exc.status, exc.message, hint=FULL_IDS) from None
        if not isinstance(result, dict):
            raise self._shape(path, "something other than an interrupt")
        return cast(InterruptJSON, result)

    def batch_atomic(self) -> bool:
        """Whether the platform has ``belt serve``'s batch route (asked once; 404 or 405: no)."""
        if self._atomic is None:
            try:
                terms = self.request("GET", BATCH_PATH)
            except BeltError as exc:
                if exc.status not in (404, 405):
                    raise
                terms = None
            self._atomic = isinstance(terms, dict) and terms.get("atomic") is True
        return self._atomic

    def resolve_batch(
        self, *, ids: Sequence[str], digest: str, decision: str, data: Any = None
    ) -> BatchResult:
        """``POST /_belt/interrupts/batch``: the gates settled all or none."""
        checked = [check_id(interrupt_id, what="interrupt id") for interrupt_id in ids]
        body = {"ids": checked, "digest": digest, "decision": decision}
        body |= {} if data is None else {"data": data}
        result = self.request("POST", BATCH_PATH, body=body)
        if not isinstance(result, dict) or not isinstance(result.get("resolved"), list):
            raise self._shape(BATCH_PATH, "something other than a batch's outcome")
        return cast(BatchResult, result)

    def watch_interrupts(
        self,
        *,
        run_ids: Sequence[str] = (),
        interval: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[WatchEvent]:
        """Events as the interrupts of ``run_ids`` open and settle (unreachable: a warning)."""
        if not run_ids:
            raise runs_needed("watch", "without --api, watch follows every run in the local store")
        for run_id in run_ids:
            check_id(run_id, what="run id")
        settled = {status.value for status in InterruptStatus} - {InterruptStatus.PENDING.value}
        known: dict[str, str] = {}
        polled: set[str] = set()
        while True:
            events: list[WatchEvent] = []  # one round's, printed in the order they happened
            for run_id in run_ids:
                try:
                    items = self.list_interrupts(run_id=run_id, include_settled=True)
                except BeltError as exc:
                    # Nothing answered, or the platform failed for now: the next look may do.
                    if not isinstance(exc, Unreachable) and (exc.status or 0) < 500:
                        raise
                    events.append({"event": "warning", "message": exc.message})
                    continue
                first = run_id not in polled
                polled.add(run_id)
                for item in items:
                    interrupt_id, status = str(item.get("id")), str(item.get("status"))
                    opened = status == InterruptStatus.PENDING
                    # Not history when the watch began, nor a status belt does not know.
                    later = status in settled and not first
                    if known.get(interrupt_id) != status and (opened or later):
                        kind = ("pending" if first else "opened") if opened else status
                        events.append({"event": kind, "interrupt": item, "on_expiry": None})
                    known[interrupt_id] = status
            yield from sorted(events, key=happened_at)
            sleep(interval)

    def set_chat_settings(self, *, chat_id: str, disable_hooks: bool) -> dict[str, object]:
        """``POST /chats/{chat_id}/settings`` with ``disable_hooks``."""
        path = f"/chats/{check_id(chat_id, what='chat id')}/settings"
        result = self.request("POST", path, body={"disable_hooks": disable_hooks})
        if isinstance(result, dict):
            return result
        return {"id": chat_id, "agent_data": {"disable_hooks": disable_hooks}}

    def get_profile(self) -> dict[str, object]:
        """``GET /agent_api/v1/profile/configuration``: the whole configuration declaration."""
        return self._declaration(self.request("GET", PROFILE_PATH, envelope=False))

    def put_profile(self, declaration: dict[str, object]) -> dict[str, object]:
        """``PUT`` the whole configuration declaration; returns it as stored."""
        stored = self.request(
            "PUT", PROFILE_PATH, body=declaration, envelope=False, what="the profile"
        )
        return self._declaration(stored)

    def _declaration(self, document: Any) -> dict[str, object]:
        if not isinstance(document, dict):
            raise self._shape(PROFILE_PATH, "something other than an object")
        return document

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _shape(self, path: str, got: str) -> BeltError:
        """The error for a success answer to ``path`` that holds ``got``."""
        status = self._answered
        return remote_error(status, f"{self.shown_url(path)} answered HTTP {status} with {got}")

    def _unwrap(self, url: str, response: httpx.Response, raw: bytes, envelope: bool) -> Any:
        if not raw:
            return None
        status = response.status_code
        try:
            document = decode(raw)
        except StrictJSONError as exc:
            raise remote_error(
                status, f"{url} answered HTTP {status} with a body that is not JSON ({exc})"
            ) from None
        if not envelope:
            return document
        if not isinstance(document, dict) or "data" not in document:
            raise remote_error(
                status,
                f'{url} answered HTTP {status} without the {{"data": ...}} envelope of the '
                "platform API",
            )
        return document["data"]

    def _redirect(self, url: str, response: httpx.Response) -> BeltError:
        """The error for a redirect, naming where it points (scheme, host and path only)."""
        status = response.status_code
        where = ""
        with contextlib.suppress(ValueError):  # a location that is no URL: the status says enough
            target = urljoin(str(response.request.url), response.headers.get("location", ""))
            parts = urlsplit(target)
            if parts.scheme in ("http", "https"):
                where = f" to {parts.scheme}://{url_host(target)}{self._clip(parts.path)}"
        return remote_error(
            status, f"{url} answered HTTP {status}, a redirect{where}", hint=REDIRECT_HINT
        )

    def _problem(
        self, url: str, response: httpx.Response, raw: bytes, what: str | None = None
    ) -> BeltError:
        status, problem = response.status_code, None
        with contextlib.suppress(StrictJSONError):
            problem = decode(raw)
        fields = problem if isinstance(problem, dict) else {}
        named = (fields.get(key) for key in ("detail", "title"))
        detail = next((text for text in named if isinstance(text, str) and text.strip()), "")
        errors = fields.get("errors")
        problems = [self._clip(str(e)) for e in errors[1:]] if isinstance(errors, list) else []
        detail = self._clip(detail or response.reason_phrase or "error")
        if what is not None and status in (400, 422):
            message = f"{url} refused {what}: {detail} (HTTP {status})"
        else:
            message = f"{detail} (HTTP {status} from {url})"
        hint = KEY_HINT if status in (401, 403) else None
        return remote_error(status, message, problems=problems, hint=hint)

    def _clip(self, text: str) -> str:
        return short(self._redact(text), _DETAIL_LIMIT)
