"""``belt chat``: per-chat settings (switching an agent's hooks off for one chat)."""

from __future__ import annotations

from typing import Annotated

import typer

from belt.backends.backend import open_backend
from belt.cli.options import ApiKeyOption, ApiOption, JsonFlag, argument, option
from belt.display import output
from belt.errors import UsageError

app = typer.Typer(help="Chat settings.", no_args_is_help=True)


@app.command()
def settings(
    chat_id: Annotated[
        str,
        argument(
            "The chat to change: its id, short id or a unique prefix (whole ids with --api).",
            metavar="CHAT_ID",
        ),
    ],
    hooks_off: Annotated[
        bool | None,
        option(
            "Switch every hook of the chat's agent off, or back on.",
            "--disable-hooks/--enable-hooks",
        ),
    ] = None,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Switch hooks off or on for one chat (agent_data.disable_hooks).

    Examples:

        belt chat settings ch_q4h7c1v8b5n3t6k2m9x0 --disable-hooks
    """

    if hooks_off is None:
        raise UsageError("give --disable-hooks or --enable-hooks")

    with open_backend(api, api_key=api_key) as backend:
        chat = backend.set_chat_settings(chat_id=chat_id, disable_hooks=hooks_off)
    if not output.json_printed(json_, chat):
        output.success(
            f"hooks {'disabled' if hooks_off else 'enabled'} for chat {chat.get('id', chat_id)}"
        )
