"""``belt trigger``: send one realistic hook payload to a handler and explain the answer."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from belt.trigger import TriggerReport


def trigger(
    event: Annotated[str, typer.Argument(help="Lifecycle event, e.g. agent.tool_call.")],
    to: Annotated[str, typer.Option("--to", help="Webhook URL to POST the payload to.")],
    data: Annotated[
        str | None,
        typer.Option(help="JSON object (or @FILE) deep-merged into the sample payload."),
    ] = None,
    secret: Annotated[
        str | None, typer.Option(help="whsec_... secret to sign the request with.")
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")] = False,
) -> None:
    """Send EVENT's sample payload to a handler and say what the platform would do.

    Prints the HTTP status, the body, the effect of the decision, any injection and its
    lifetime, and the transcript row the call would leave. Keys of the answer the platform
    does not know are ignored, each with a warning. A handler that cannot be reached, answers
    non-2xx or returns an invalid body exits 6.

    Examples:

        belt trigger agent.tool_call --to http://127.0.0.1:8787/hooks
    """
    from belt import output
    from belt.trigger import failure, read_data
    from belt.trigger import trigger as send

    report = send(event, to=to, data=read_data(data) if data is not None else None, secret=secret)
    if json_:
        output.print_json(report.to_json())
    else:
        render(report)
    if not report.ok:
        raise failure(report)


def render(report: TriggerReport) -> None:
    """The report as labelled lines."""
    from belt import output

    signed = " (signed)" if report.signed else ""
    if report.status is None:
        status, body = f"no response after {report.duration_ms} ms", None
    else:
        status, body = f"HTTP {report.status} in {report.duration_ms} ms", report.body or "(empty)"
    row = report.transcript_row
    if row is None:
        transcript = "no row (nothing a reader would see)"
    else:
        transcript = f"{row['text']}  {json.dumps(row['event']['hook'], ensure_ascii=False)}"
    output.key_values(
        [
            ("sent", f"{report.event} to {report.handler}{signed}"),
            ("status", status),
            ("body", body),
            ("error", report.error),
            *(("warning", warning) for warning in report.warnings),
            ("effect", report.effect),
            ("inject", report.injection),
            ("system", report.system),
            ("transcript", transcript),
        ]
    )
