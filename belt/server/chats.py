"""The chat routes of ``belt serve``: a chat and its transcript, hook rows included.

``GET /chats/{id}`` answers the ChatDTO (status, active run, ``chat_messages``,
``pending_interrupts``) and ``GET /chats/{id}/messages`` the chat's messages, in the platform's
envelope, over the store: any client can read a simulated transcript as it would read the
platform's. The official SDKs' agents call them, so their errors are typed as the agent routes'
(``Problem.agent_response``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.errors import BeltError
from belt.records.views import chat_dto
from belt.server.problems import belt_problem, envelope

if TYPE_CHECKING:
    from belt.store import Store


class ChatsApi:
    """Reads chats from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def chat(self, request: Request) -> Response:
        """GET /chats/{chat_id}: the ChatDTO."""
        try:
            dto = await run_in_threadpool(
                chat_dto, self.store, request.path_params["chat_id"], public=True
            )
        except BeltError as exc:
            return belt_problem(exc).agent_response()
        return envelope(dto)

    async def messages(self, request: Request) -> Response:
        """GET /chats/{chat_id}/messages: the ChatMessageDTOs, in order."""
        try:
            dto = await run_in_threadpool(
                chat_dto, self.store, request.path_params["chat_id"], public=True
            )
        except BeltError as exc:
            return belt_problem(exc).agent_response()
        return envelope(dto["chat_messages"])


def chat_routes(store: Store) -> list[Route]:
    """The chat routes over ``store``."""
    api = ChatsApi(store)
    return [
        Route("/chats/{chat_id}", api.chat, methods=["GET"]),
        Route("/chats/{chat_id}/messages", api.messages, methods=["GET"]),
    ]
