"""``belt trigger``: send one realistic hook payload to a handler and explain the answer."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import argument, finite, option
from belt.display import output
from belt.reading.inputs import read_json_object_option as read_object

if TYPE_CHECKING:
    from belt.deliveries.trigger import TriggerReport


def trigger(
    ctx: typer.Context,
    event: Annotated[str, argument("Lifecycle event, e.g. agent.tool_call.")],
    to: Annotated[
        str | None,
        option(
            "Webhook URL to POST the payload to, or an in-process handler "
            "(py:MODULE:FUNC or py:path/to/file.py:FUNC, called with the payload as a dict). "
            "Default: the hooks of the belt serve you started last that is still running.",
            metavar="URL|py:MODULE:FUNC",
        ),
    ] = None,
    data: Annotated[
        str | None, option("JSON object deep-merged into the sample payload.", metavar="JSON|@FILE")
    ] = None,
    payload: Annotated[
        str | None,
        option(
            "The whole payload (a JSON object), sent as given: no sample merged in.",
            metavar="JSON|@FILE",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        option(
            "Set the value at a dotted path of the payload, e.g. "
            'data.arguments=\'{"command": "ls"}\'. Repeatable.',
            "--set",
            metavar="PATH=JSON",
        ),
    ] = None,
    unset: Annotated[
        list[str] | None,
        option(
            "Remove the key at a dotted path of the payload (before any --set). Repeatable.",
            metavar="PATH",
        ),
    ] = None,
    secret: Annotated[str | None, option("whsec_... secret to sign the request with.")] = None,
    timeout: Annotated[
        float,
        option(
            "Seconds the handler has to answer, in all (more than 0, at most 300).",
            metavar="S",
            callback=finite,
        ),
    ] = 30,
    json_: Annotated[bool, option("Print the whole report as JSON.", "--json")] = False,
) -> None:
    """Send a payload of EVENT to a handler and say what the platform would do.

    The payload is EVENT's sample (--data merged into it, --unset and --set editing it) or the
    one --payload gives. Without --to it goes to the hooks of the belt serve you started last
    that is still running (one line on stderr names it; none running is exit 6, saying how to
    start one). Prints the payload sent, the HTTP status, the body, the effect of the decision,
    any injection and its lifetime, and the transcript row the call would leave. Keys of the
    answer the platform does not know are ignored, each with a warning. A failed call exits by
    the table of a remote's answers (docs/cli.md): 6 when nothing answered (refused, or no
    answer within --timeout seconds), 3 on HTTP 404, 4 on 409, 7 on 401 or 403, and 1 on any
    other status, a connection closed after the request was sent (the handler crashed on it),
    or a body that is not a valid response (a py: handler that raises, as an HTTP 500;
    `belt -v trigger` prints its traceback). The hint says what to look at for what happened.

    Examples:

        belt trigger agent.tool_call

        belt trigger agent.tool_call --to py:hooks.py:guard --set data.arguments='{"command": "ls"}'
    """
    from belt.deliveries import trigger as delivery  # start-up: httpx

    if to is None:
        serve, others = delivery.running_serve()
        to = serve.hooks_url
        latest = f" (the latest of {others + 1} running; --to picks another)" if others else ""
        output.echo(f"sending to {serve.describe()}{latest}: {to}", stderr=True)
    report = delivery.trigger(
        event,
        to=to,
        data=read_object(data, option="--data") if data is not None else None,
        payload=read_object(payload, option="--payload") if payload is not None else None,
        sets=set_ or [],
        unsets=unset or [],
        secret=secret,
        timeout=timeout,
    )
    if not output.json_printed(json_, report.to_json()):
        render(report)
    if report.traceback and ctx.find_root().params.get("verbose"):
        output.block(report.traceback, stderr=True)
    if not report.ok:
        raise delivery.failure(report)


def render(report: TriggerReport) -> None:
    """The report as labelled lines."""
    signed = " (signed)" if report.signed else ""
    if report.status is None:
        status, body = f"no response after {report.duration_ms} ms", None
    elif report.in_process:
        # A function has no status or body: what it returned, read as a webhook's body is.
        status = f"{'returned' if report.ok else 'failed'} in {report.duration_ms} ms"
        body = None if report.response is None else output.json_text(report.response)
    else:
        status, body = f"HTTP {report.status} in {report.duration_ms} ms", report.body or "(empty)"
    row = report.transcript_row
    transcript = row and f"{row['text']}  {json.dumps(row['event']['hook'], ensure_ascii=False)}"
    output.key_values(
        [
            ("sent", f"{report.event} to {report.handler}{signed}"),
            ("payload", output.json_text(report.payload, separators=(", ", ": "))),
            ("status", status),
            ("answer" if report.in_process else "body", body),
            ("error", report.error),
            *(("warning", warning) for warning in report.warnings),
            ("effect", report.effect),
            ("inject", report.injection),
            ("system", report.system),
            ("transcript", transcript or "no row (nothing a reader would see)"),
        ]
    )
