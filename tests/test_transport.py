"""belt.outgoing.transport: one transport per process on httpx's public API, for every outgoing
call.

Each test here failed on the transport it replaced (three ways to send a webhook, one of them
belt's own HTTP/1.1 on raw sockets, a client per run and per command with a TLS context each).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import socket
import ssl
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

import belt
from belt.backends.remote import Platform
from belt.engine.entrypoints import run_scenario
from belt.handlers.webhook import deliver
from belt.outgoing import transport
from belt.server.forward import Forwarder
from belt.wire.platform import LifecycleHookPayload
from belt.wire.samples import sample_payload
from tests import hostile
from tests.cli.runner import belt as run_belt
from tests.test_webhook import keep_alive

ROOT = Path(belt.__file__).parent
LIBRARIES = ("httpx", "httpcore", "h11", "anyio")
SOCKET_USERS = {
    "belt.server.listen": "binds the server's listening socket",
    "belt.records.leases": "the host name",
    "belt.records.serves": "a connect that only probes a serve's port",
    "belt.executor.worker": "the host name",
    "belt.usercode.supervisor": "its workers' socket pairs",
    "belt.testing.suite": "the host name of a JUnit report",
}
"""The modules that may import ``socket``, and what for: none of them speaks HTTP."""


def private_names() -> set[str]:
    """The ``_``-named attributes httpx's and httpcore's objects and modules have."""
    names: set[str] = set()
    for library in (httpx, httpcore):
        for path in Path(str(library.__file__)).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
        names.update(dir(library))
    return {name for name in names if name.startswith("_") and not name.endswith("__")}


def belt_modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        yield name.removesuffix(".__init__"), ast.parse(path.read_text(), str(path))


def test_no_module_reaches_into_httpx_or_httpcore_or_speaks_http_itself() -> None:
    private = private_names()
    # The fence sees what it fences: the names the old transport reached for are in the scan.
    assert {"_pool", "_network_backend"} <= private
    assert "_transport" in private
    found: list[str] = []
    for name, tree in belt_modules():
        for node in ast.walk(tree):
            where = f"{name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                imported = [alias.name for alias in node.names]
                for module in modules:
                    top, _, rest = module.partition(".")
                    if top in LIBRARIES and (rest.startswith("_") or "._" in f".{rest}"):
                        found.append(f"{where} imports {module}")
                    if top == "httpcore" and name != "belt.outgoing.transport":
                        found.append(f"{where} imports httpcore (only belt.outgoing.transport may)")
                    if top == "socket" and name not in SOCKET_USERS:
                        found.append(f"{where} imports socket")
                    if top in LIBRARIES and isinstance(node, ast.ImportFrom):
                        found += [f"{where} imports {module}.{n}" for n in imported if n[0] == "_"]
            elif isinstance(node, ast.Attribute) and node.attr in private:
                owner = node.value
                mine = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
                if not mine:
                    found.append(f"{where} uses .{node.attr}, a private name of httpx/httpcore")
            elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
                if b"HTTP/1" in node.value:
                    found.append(f"{where} writes or reads HTTP/1.x itself: {node.value[:40]!r}")
    assert found == []


class Recorder:
    """A loopback HTTP/1.1 server (the standard library's) answering every request with
    ``body``; it keeps each request's method, target, headers and client address."""

    def __init__(self, body: bytes = b"{}") -> None:
        self.requests: list[tuple[str, str, dict[str, str], tuple[str, int]]] = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                requests.append((self.command, self.path, headers, self.client_address))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer  # noqa: N815 (the standard library's names)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def ports(self) -> list[int]:
        """The client port of each request: one per connection it came on."""
        return [address[1] for *_, address in self.requests]


def test_one_process_reuses_its_connection_across_runs_and_commands(tmp_path: Path) -> None:
    recorder = Recorder()
    with recorder as url:
        scenario = tmp_path / "hooked.json"
        hook = {"event": "agent.turn_start", "type": "webhook", "handler": f"{url}/hooks"}
        document = {
            "agent": {"name": "hooked", "hooks": [hook]},
            "turns": [{"user": "hi", "model": [{"say": "Done."}]}],
        }
        scenario.write_text(json.dumps(document))
        for _ in range(3):
            report, _ = run_scenario(scenario=scenario)
            assert [h["error"] for h in report["hook_executions"]] == [None]
        sent = run_belt("trigger", "agent.start", "--to", f"{url}/hooks")
        assert sent.exit_code == 0, sent.stderr
    # Three runs (each its own dispatcher) and a command on one connection: on two at most,
    # should a loaded machine keep the connection idle past its keep-alive (a client per run
    # and per command made four).
    assert len(recorder.requests) == 4
    assert len(set(recorder.ports())) <= 2


def test_a_forked_child_never_uses_its_parents_connections() -> None:
    recorder = Recorder()
    with recorder as url:
        assert deliver(f"{url}/h", sample_payload("agent.start"), timeout=10).error is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
            pid = os.fork()
        if pid == 0:  # the child: one delivery, then gone
            result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10)
            os._exit(0 if result.error is None else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert deliver(f"{url}/h", sample_payload("agent.start"), timeout=10).error is None
    parent, child, again = recorder.ports()
    assert child != parent  # the child opened a connection of its own
    assert again != child


def test_a_lent_transport_carries_the_calls_of_every_thread_until_it_is_given_back() -> None:
    lent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        lent.append(request.url.path)
        return httpx.Response(200, json={"decision": "deny", "reason": "lent"})

    def decided(url: str) -> str | None:
        response = deliver(url, sample_payload("agent.start"), timeout=10).response
        return response.reason if response is not None else None

    async def forwarded(url: str) -> str | None:
        async with Forwarder(url) as decide:
            verdict = await decide(
                LifecycleHookPayload.model_validate(sample_payload("agent.start"))
            )
        return verdict.response.reason

    recorder = Recorder(b'{"decision": "allow"}')
    with recorder as url:
        with transport.using(httpx.MockTransport(answer)):
            assert decided(f"{url}/here") == "lent"
            elsewhere: list[str | None] = []
            thread = threading.Thread(target=lambda: elsewhere.append(decided(f"{url}/there")))
            thread.start()
            thread.join()
            assert elsewhere == ["lent"]
            assert asyncio.run(forwarded(f"{url}/forwarded")) == "lent"
        assert decided(f"{url}/own") is None  # the process's own transport again: the recorder
    assert lent == ["/here", "/there", "/forwarded"]
    assert [target for _, target, _, _ in recorder.requests] == ["/own"]


def test_a_webhook_delivery_never_carries_the_api_key() -> None:
    recorder = Recorder(b'{"data": []}')
    with recorder as url:
        # The same origin for the platform's API and the hook: the same kept connections.
        platform = Platform(url, api_key="sk-s3cret")
        deliver(f"{url}/h", sample_payload("agent.start"), timeout=10)
        assert platform.list_interrupts(run_id="run_1") == []
        deliver(f"{url}/h", sample_payload("agent.start"), timeout=10)
    methods = [
        (method, headers.get("authorization")) for method, _, headers, _ in recorder.requests
    ]
    assert methods == [("POST", None), ("GET", "Bearer sk-s3cret"), ("POST", None)]


async def forwarded(url: str) -> Any:
    async with Forwarder(url) as decide:
        return await decide(LifecycleHookPayload.model_validate(sample_payload("agent.start")))


@pytest.fixture
def proxy() -> Iterator[tuple[str, Recorder]]:
    """A stand-in for a proxy on loopback that answers every request itself."""
    recorder = Recorder(b'{"data": []}')
    with recorder as url:
        yield url, recorder


def test_environment_proxies_are_never_used_for_a_loopback_hook(
    monkeypatch: pytest.MonkeyPatch, proxy: tuple[str, Recorder]
) -> None:
    address, through = proxy
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, address)
    hook = Recorder(b'{"data": []}')
    with hook as url:
        localhost = url.replace("127.0.0.1", "localhost")
        for target in (url, localhost):
            result = deliver(f"{target}/h", sample_payload("agent.start"), timeout=10)
            assert result.error is None, result.error
            # A platform API (or belt serve) on this machine, as --api calls it.
            assert Platform(target).list_interrupts(run_id="run_1") == []
            # A handler on this machine, as belt serve --forward-to calls it.
            assert asyncio.run(forwarded(f"{target}/h")).response is not None
    assert through.requests == []
    assert len(hook.requests) == 6


def test_a_remote_hook_goes_through_the_environments_proxy_unless_no_proxy_names_it(
    monkeypatch: pytest.MonkeyPatch, proxy: tuple[str, Recorder]
) -> None:
    address, through = proxy
    monkeypatch.setenv("HTTP_PROXY", address)
    for name in ("http_proxy", "all_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    result = deliver("http://hooks.example.invalid/h", sample_payload("agent.start"), timeout=10)
    assert result.error is None, result.error
    [(method, target, headers, _)] = through.requests
    assert (method, target, headers["host"]) == (
        "POST",
        "http://hooks.example.invalid/h",
        "hooks.example.invalid",
    )
    monkeypatch.setenv("NO_PROXY", ".example.invalid")
    assert transport.proxy_for("http", "hooks.example.invalid") is None
    assert transport.proxy_for("http", "example.invalid") is None
    assert transport.proxy_for("http", "notexample.invalid") == address
    monkeypatch.setenv("NO_PROXY", "*")
    assert transport.proxy_for("http", "hooks.example.invalid") is None


def test_no_tls_context_for_plain_http_and_one_for_https(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Scenarios run in forked workers: each context made is a line of this file.
    made = tmp_path / "contexts"
    made.touch()
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        with made.open("a") as counter:
            counter.write(f"{os.getpid()}\n")
        return create(*args, **kwargs)

    # What a certificate-checking context is made by (httpx's create_ssl_context too).
    monkeypatch.setattr(ssl, "create_default_context", counted)
    transport.close()
    recorder = Recorder()
    with recorder as url:
        suite = tmp_path / "suite"
        suite.mkdir()
        for n in range(4):
            hook = {"event": "agent.turn_start", "type": "webhook", "handler": f"{url}/h{n}"}
            document = {
                "agent": {"name": f"s{n}", "hooks": [hook]},
                "turns": [{"user": "hi", "model": [{"say": "Done."}]}],
                "expect": [{"event": "agent.turn_start", "error": False}],
            }
            (suite / f"s{n}.json").write_text(json.dumps(document))
        tested = run_belt("test", str(suite))
        assert tested.exit_code == 0, tested.stdout + tested.stderr
    assert len(recorder.requests) == 4
    assert made.read_text() == ""  # four webhook scenarios over http: no TLS context at all
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    for _ in range(3):
        result = deliver(f"https://127.0.0.1:{port}/h", sample_payload("agent.start"), timeout=5)
        assert result.error is not None and result.error.startswith("cannot connect")
    assert len(made.read_text().split()) == 1


@pytest.mark.parametrize("phase", ["head", "body"])
def test_a_kept_connection_that_trickles_its_next_answer_ends_at_the_total_deadline(
    phase: str,
) -> None:
    # The first answer whole; the next one trickled a byte every 0.1 s for 30 s, each byte
    # well within any per-read timeout, on the connection the first one left open.
    start = (
        b"HTTP/1.1 200 OK\r\nX-Slow: "
        if phase == "head"
        else b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    )
    connections: list[int] = []

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        connections.append(1)
        conn.sendall(keep_alive(b"{}"))
        if hostile.read_request(conn) is not None:
            hostile.trickle(start)(conn, stop)

    with hostile.hostile_server(behave) as url:
        first = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10)
        assert first.error is None
        late = deliver(f"{url}/h", sample_payload("agent.start"), timeout=1)
    assert late.error == f"{url.removeprefix('http://')} did not answer within 1 s"
    assert late.duration_ms < 20_000
    assert connections == [1]


def test_an_api_call_and_a_delivery_keep_the_same_total_deadline() -> None:
    with hostile.hostile_server(hostile.slow_head()) as url:
        with pytest.raises(httpx.TimeoutException):
            with transport.call("GET", f"{url}/x", timeout=0.5) as answer:
                transport.read(answer, 1024)
    with hostile.hostile_server(hostile.slow_body()) as url:
        with pytest.raises(httpx.TimeoutException):
            with transport.call("GET", f"{url}/x", timeout=0.5) as answer:
                transport.read(answer, 1024 * 1024)


def test_every_httpcore_error_has_an_httpx_error_of_its_name() -> None:
    # What belt.outgoing.transport raises for httpcore's errors: httpx's of the same name.
    roots = (
        httpcore.TimeoutException,
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.ProxyError,
        httpcore.UnsupportedProtocol,
    )
    errors = [
        value
        for value in vars(httpcore).values()
        if isinstance(value, type) and issubclass(value, roots)
    ]
    assert len(errors) >= 14
    for error in errors:
        assert issubclass(getattr(httpx, error.__name__), httpx.TransportError), error
