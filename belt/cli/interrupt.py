"""``belt interrupt``: list, show, resolve, sweep and open the interrupts that gate hooks create."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from belt.errors import NotFound, UsageError

app = typer.Typer(
    help="List, show, resolve and open interrupts (the gates hooks put on runs).",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        envvar="BELT_API_URL",
        metavar="URL",
        help="Talk to this platform API (or `belt serve`) instead of the local store.",
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        metavar="KEY",
        show_default=False,
        help="Bearer key for --api (default: $INFSH_API_KEY, else $INFERENCE_API_KEY).",
    ),
]


class Decision(StrEnum):
    """How an interrupt can be resolved."""

    allow = "allow"
    deny = "deny"


@app.command("list")
def list_(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="The run whose interrupts to list.")
    ],
    all_: Annotated[bool, typer.Option("--all", help="Include settled interrupts.")] = False,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """List a run's pending interrupts (all of them with --all)."""
    from belt import output

    if api:
        from belt.remote import Platform

        with Platform(api, api_key=api_key) as platform:
            items = platform.list_interrupts(run_id=run_id, include_settled=all_)
    else:
        from belt.interrupts import list_interrupts

        items = list_interrupts(run_id=run_id, include_settled=all_)
    if json_:
        output.print_json(items)
        return
    if not items:
        what = "interrupts" if all_ else "pending interrupts"
        output.echo(f"no {what} on run {run_id}", stderr=True)
        return
    now = _now()
    output.table(
        ["id", "reason", "source", "resource", "status", "expires in"],
        [
            [
                item.get("id"),
                item.get("reason"),
                item.get("source"),
                _resource(item),
                _status(item),
                expires_in(item, now),
            ]
            for item in items
        ],
    )


@app.command()
def show(
    interrupt_id: Annotated[str, typer.Argument(metavar="ID", help="The interrupt to show.")],
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN_ID",
            help="The interrupt's run; needed with --api, whose API lists interrupts per run.",
        ),
    ] = None,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Show one interrupt: its state, deadline, resolution and the hook payload it holds."""
    from belt import output

    default_resolution = None
    if api:
        if not run:
            raise UsageError(
                "with --api, show needs --run RUN_ID",
                hint="the platform API has no route for one interrupt; belt finds it in the "
                "run's list (GET /agent-runs/RUN_ID/interrupts)",
            )
        from belt.remote import Platform

        with Platform(api, api_key=api_key) as platform:
            item = platform.get_interrupt(interrupt_id=interrupt_id, run_id=run)
    else:
        from belt.interrupts import read_record, to_dto

        record = read_record(interrupt_id=interrupt_id)
        default_resolution = record.get("default_resolution") or "deny"
        item = to_dto(record)
        if run and item.get("run_id") != run:
            raise NotFound(f"interrupt {interrupt_id} is not on run {run}")
    if json_:
        output.print_json(item)
        return
    pairs: list[tuple[str, Any]] = [
        ("id", item.get("id")),
        ("short id", item.get("short_id")),
        ("status", _status(item)),
        ("reason", item.get("reason")),
        ("source", item.get("source")),
        ("resource", _resource(item)),
        ("run", item.get("run_id")),
        ("chat", item.get("chat_id")),
        ("created", item.get("created_at")),
        ("updated", item.get("updated_at")),
        ("expires", item.get("expires_at")),
    ]
    if item.get("status") == "pending":
        pairs.append(("expires in", expires_in(item, _now())))
        pairs.append(("on expiry", default_resolution))
    pairs += [
        ("resolved", item.get("resolved_at")),
        ("resolved data", item.get("resolved_data")),
        ("meta", item.get("meta")),
    ]
    output.key_values(pairs)


@app.command()
def resolve(
    interrupt_id: Annotated[str, typer.Argument(metavar="ID", help="The interrupt to resolve.")],
    decision: Annotated[Decision, typer.Argument(metavar="allow|deny", help="The decision.")],
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            metavar="JSON|@FILE",
            help="Stored as resolved_data: a JSON value, or @FILE to read one.",
        ),
    ] = None,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Resolve a pending interrupt; exit 4 if it is no longer pending."""
    from belt import output
    from belt.inputs import read_json_option

    resolved_data = None if data is None else read_json_option(data, option="--data")
    if api:
        from belt.remote import Platform

        with Platform(api, api_key=api_key) as platform:
            item = platform.resolve_interrupt(
                interrupt_id=interrupt_id, decision=decision.value, data=resolved_data
            )
    else:
        from belt.interrupts import resolve_interrupt

        item = resolve_interrupt(
            interrupt_id=interrupt_id, decision=decision.value, data=resolved_data
        )
    if json_:
        output.print_json(item)
        return
    resolution = item.get("resolution") or decision.value
    output.success(f"{item.get('id') or interrupt_id} resolved: {resolution}")


@app.command()
def sweep(json_: JsonFlag = False) -> None:
    """Settle every overdue pending interrupt with its default resolution (status expired)."""
    from belt import output
    from belt.interrupts import sweep as sweep_store

    settled = sweep_store()
    if json_:
        output.print_json({"settled": len(settled), "interrupts": settled})
        return
    output.success(f"settled {len(settled)} overdue interrupt(s)")
    if settled:
        output.table(
            ["id", "run", "source", "resolution"],
            [[item["id"], item["run_id"], item["source"], item["resolution"]] for item in settled],
        )


@app.command()
def create(
    run: Annotated[str, typer.Option("--run", metavar="RUN_ID", help="The run to gate.")],
    chat: Annotated[str, typer.Option("--chat", metavar="CHAT_ID", help="The run's chat.")],
    event: Annotated[str, typer.Option("--event", help="A gate-able event, e.g. agent.tool_call.")],
    timeout: Annotated[
        int | None,
        typer.Option("--timeout", metavar="S", help="Seconds until it expires (default 300)."),
    ] = None,
    default_resolution: Annotated[
        Decision | None,
        typer.Option("--default-resolution", help="Resolution on expiry (default allow)."),
    ] = None,
    meta: Annotated[
        str | None,
        typer.Option(
            "--meta",
            metavar="JSON|@FILE",
            help="The hook payload to store as meta (a JSON object).",
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Open a hook gate by hand, as a gate hook on EVENT would."""
    from belt import output
    from belt.inputs import read_json_object_option
    from belt.interrupts import create_interrupt

    item = create_interrupt(
        run_id=run,
        chat_id=chat,
        event=event,
        timeout=timeout,
        default_resolution=default_resolution.value if default_resolution else None,
        meta=None if meta is None else read_json_object_option(meta, option="--meta"),
    )
    if json_:
        output.print_json(item)
        return
    output.success(f"opened {item['id']} on run {run}")
    output.key_values(
        [
            ("source", item["source"]),
            ("resource", _resource(item)),
            ("expires", item["expires_at"]),
            ("on expiry", default_resolution.value if default_resolution else "allow"),
        ]
    )


def _now() -> datetime:
    from belt.store.clock import utcnow

    return utcnow()


def _resource(item: dict[str, Any]) -> str:
    kind = item.get("resource_type") or "-"
    return f"{kind}:{item['resource_id']}" if item.get("resource_id") else kind


def _status(item: dict[str, Any]) -> str:
    status = str(item.get("status"))
    return f"{status} ({item['resolution']})" if item.get("resolution") else status


def expires_in(item: dict[str, Any], now: datetime) -> str:
    """How long a pending interrupt has left, as ``4m 12s``; ``overdue`` or ``-`` otherwise."""
    from belt.store.clock import parse_timestamp

    if item.get("status") != "pending" or not item.get("expires_at"):
        return "-"
    left = int((parse_timestamp(item["expires_at"]) - now).total_seconds())
    if left <= 0:
        return "overdue"
    hours, rest = divmod(left, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"
