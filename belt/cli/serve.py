"""``belt serve``: the local hook handler (policy or Python callable) and platform API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from belt.cli import leave, report
from belt.cli.options import (
    OtlpOption,
    TraceFileOption,
    moment_option,
    option,
    passed_on,
    start_tracing,
)


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, option("Address to listen on; not loopback only with --token.")
    ] = "127.0.0.1",
    port: Annotated[int, option("Port to listen on (0 picks a free one).")] = 8787,
    policy: Annotated[
        Path | None, option("TOML policy deciding hooks (see docs/policy.md).")
    ] = None,
    handler: Annotated[
        str | None,
        option(
            "Python callable deciding hooks: py:MODULE:FUNC or py:path/to/file.py:FUNC "
            "(the py: is optional); it gets the payload as a dict (docs/handlers.md)."
        ),
    ] = None,
    secret: Annotated[
        str | None,
        option(
            "whsec_... secret: hook requests must carry Standard Webhooks headers; "
            "`new` makes one and prints it on the ready line."
        ),
    ] = None,
    token: Annotated[
        str | None,
        option(
            "Require 'Authorization: Bearer TOKEN' on every route but /healthz and the "
            "inspector page's files, whatever the Host: how to share a server.",
            envvar="BELT_SERVE_TOKEN",
            show_envvar=True,
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        option(
            "Also answer requests sent to NAME (a tunnel's or a container's name); "
            "without --token only loopback names are answered. Repeatable.",
            metavar="NAME",
        ),
    ] = None,
    sweep_interval: Annotated[
        float, option("Seconds between sweeps that settle overdue gates (0: off).")
    ] = 60.0,
    workers: Annotated[int, option("Server processes sharing the port and the store.")] = 1,
    handler_timeout: Annotated[
        float, option("Seconds a --handler call may take; later is a 504 problem.")
    ] = 10.0,
    max_connections: Annotated[
        int | None,
        option(
            "Connections held at once per process (default 1000, or fewer to fit the "
            "open-file limit)."
        ),
    ] = None,
    resume: Annotated[
        bool,
        option(
            "Continue simulated runs as soon as their gates are settled (no sim resume).",
            "--resume",
        ),
    ] = False,
    approvals: Annotated[
        Path | None,
        option(
            "Approval rules that settle gates as they open, as `belt interrupt auto` does "
            "(one process settles, with --workers N).",
            metavar="FILE",
        ),
    ] = None,
    forward_to: Annotated[
        str | None,
        option(
            "Pass each hook request on to your handler at URL; answer and journal its answer.",
            metavar="URL",
        ),
    ] = None,
    model: Annotated[
        Path | None,
        option(
            "Model script the agent routes answer with (see docs/emulator.md); "
            "default: one short reply, no tool."
        ),
    ] = None,
    agents: Annotated[
        Path | None, option("Directory of agent files that template refs (ns/name@v) resolve to.")
    ] = None,
    clock: Annotated[
        str | None,
        option(
            "Serve on a virtual clock that starts here and moves only with "
            "POST /_belt/clock (docs/serve.md).",
            metavar="RFC3339",
        ),
    ] = None,
    grace: Annotated[
        float,
        option(
            "Seconds the requests still open at Ctrl-C or SIGTERM get to end; those left "
            "are then answered 503 and journalled as not answered."
        ),
    ] = 1.0,
    json_: Annotated[
        bool, option("Print one JSON object per request on stdout.", "--json")
    ] = False,
    open_: Annotated[
        bool, option("Open the inspector in a web browser once listening.", "--open")
    ] = False,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Serve hooks and the platform API locally until Ctrl-C or SIGTERM.

    POST /hooks (and /hooks/NAME) answer hook payloads, decided by --policy, --handler,
    your own handler (--forward-to) or allow-all; the interrupt and chat-settings routes of the
    platform API work over the same store, so `belt interrupt ... --api URL` can point here.
    Every hook request and its answer are appended to the journal in the store, which
    `belt replay journal` delivers again to an edited handler. Request heads must arrive
    within 10 s, their bodies within 30 s more, and idle connections close after 5 s (see
    docs/serve.md and docs/reliability.md). The agent routes let the official SDKs run their
    agents here, offline: each message is a simulated run whose hooks fire as in `belt sim`,
    answered by the --model script (docs/emulator.md). With --approvals FILE the server settles
    gates by rules as they open, as `belt interrupt auto` would (docs/interrupts.md).

    Every route answers only requests no other site's page could send: to a loopback name
    (127.0.0.1, localhost, [::1]) or an --allow-host NAME, or carrying the --token; from no
    other Origin; with JSON bodies. No request names code to run: py: handlers come from
    --handler and the --agents files.

    Ctrl-C or SIGTERM stops taking connections and gives the requests still open --grace
    seconds to end; each left is cut off on one line. Ctrl-C exits 130, SIGTERM 0.

    Examples:

        belt serve --policy examples/policy.toml --open
        belt serve --port 0 --secret new
    """
    from belt.server.stopping import Stopped, stopping_on_signals  # start-up: the server

    start_tracing(otlp, trace)
    try:
        with stopping_on_signals():
            from belt.server.listen import serve as serve_until_stopped  # start-up: the server

            serve_until_stopped(
                **passed_on(ctx, "clock"),
                verbose=bool(ctx.find_root().params.get("verbose")),
                clock=moment_option(clock, "--clock"),
            )
    except Stopped as stop:
        if stop.threads_left:
            # A --handler call cut off goes on in its thread, and Python would wait for it at
            # exit: the line is said and the process ends now, as the signal asked.

            report(stop, verbose=False)
            leave(int(stop.exit_code))
        raise
