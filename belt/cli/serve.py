"""``belt serve``: the local hook handler (policy or Python callable) and platform API."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer


def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on; not loopback only with --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8787,
    policy: Annotated[
        Path | None, typer.Option(help="TOML policy deciding hooks (see docs/policy.md).")
    ] = None,
    handler: Annotated[
        str | None,
        typer.Option(help="Python callable deciding hooks: MODULE:FUNC or path/to/file.py:FUNC."),
    ] = None,
    secret: Annotated[
        str | None,
        typer.Option(help="whsec_... secret: hook requests must carry Standard Webhooks headers."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="Require 'Authorization: Bearer TOKEN' on every route but /healthz."),
    ] = None,
    sweep_interval: Annotated[
        float, typer.Option(help="Seconds between sweeps that settle overdue gates (0: off).")
    ] = 60.0,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue simulated runs as soon as their gates are settled (no sim resume).",
        ),
    ] = False,
    forward_to: Annotated[
        str | None,
        typer.Option(
            "--forward-to",
            metavar="URL",
            help="Pass each hook request on to your handler at URL; answer and journal its answer.",
        ),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per request on stdout.")
    ] = False,
) -> None:
    """Serve hooks and the platform API locally until Ctrl-C.

    POST /hooks (and /hooks/NAME) answer hook payloads, decided by --policy, --handler,
    your own handler (--forward-to) or allow-all; the interrupt and chat-settings routes of the
    platform API work over the same store, so `belt interrupt ... --api URL` can point here.
    Every hook request and its answer are appended to the journal in the store, which
    `belt replay journal` delivers again to an edited handler.
    """
    from belt import output
    from belt.server.run import serve as run_server

    run_server(
        host=host,
        port=port,
        policy=policy,
        handler=handler,
        secret=secret,
        token=token,
        sweep_interval=sweep_interval,
        resume=resume,
        forward_to=forward_to,
        report=output.print_json_line if json_ else render_record,
        on_listening=render_listening,
    )


def render_listening(info: dict[str, Any]) -> None:
    """The start-up line, on stderr so stdout carries only request lines."""
    from belt import output

    extras = [str(info["decider"])]
    if info["signed"]:
        extras.append("signed requests only")
    if info["token"]:
        extras.append("bearer token required")
    interval = info["sweep_interval"]
    extras.append(f"sweep every {interval:g} s" if interval else "sweep off")
    if info.get("resume"):
        extras.append("runs continue when their gates are settled")
    output.styled(
        f"belt serve listening on {info['url']} ({', '.join(extras)}); "
        f"the inspector is at {info['url']}/; Ctrl-C stops",
        "bold",
        stderr=True,
    )


def render_record(record: dict[str, Any]) -> None:
    """One live line for a hook request, an API call or a sweep."""
    from belt import output

    clock = _clock(record.get("at"))
    kind = record.get("kind")
    if kind == "sweep":
        settled = ", ".join(f"{s['id']} → {s['resolution']}" for s in record["settled"])
        output.lines([(f"{clock}  sweep  settled {settled}", "yellow")])
        return
    if kind == "resume":
        what = record.get("state") or f"could not go on: {record.get('error')}"
        style = "red" if record.get("error") else ""
        output.lines([(f"{clock}  resume  run {record['run_id']} → {what}", style)])
        return
    if kind == "api":
        style = "" if record["status"] < 400 else "red"
        text = f"{clock}  {record['action']} {record['target']}  {record['status']}"
        output.lines([(f"{text}  {record['detail']}", style)])
        return
    parts = [clock]
    if record.get("name"):
        parts.append(f"[{record['name']}]")
    if record["status"] != 200:
        parts += [str(record.get("event") or "-"), str(record["status"]), record.get("error", "")]
        style = "bold red"
    else:
        parts.append(record["event"])
        if record.get("tool"):
            parts.append(record["tool"])
        decision = record["decision"]
        parts.append(decision + (" +inject" if record.get("injected") else ""))
        if record.get("reason"):
            parts.append(record["reason"])
        style = {"deny": "red", "stop": "red", "suspend": "yellow"}.get(decision, "")
    parts.append(f"{record['duration_ms']:.1f} ms")
    output.lines([("  ".join(parts), style)])
    if record.get("journal_error"):
        output.warning(f"not journalled: {record['journal_error']}")


def _clock(stamp: Any) -> str:
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return "--:--:--"
