"""The chat routes of ``belt serve``: a chat and its transcript, hook rows included.

``GET /chats/{id}`` answers the ChatDTO (status, active run, ``chat_messages``,
``pending_interrupts``) and ``GET /chats/{id}/messages`` the chat's messages, in the platform's
envelope, over the store: any client can read a simulated transcript as it would read the
platform's. The official SDKs' agents call them, so their errors are typed as the agent routes'
(``Problem.agent_response``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route

from belt.records.views import chat_dto
from belt.server.problems import answering

if TYPE_CHECKING:
    from belt.store import Store


class ChatsApi:
    """Reads chats from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def chat(self, request: Request) -> Any:
        """GET /chats/{chat_id}: the ChatDTO."""
        return await run_in_threadpool(
            chat_dto, self.store, request.path_params["chat_id"], public=True
        )

    async def messages(self, request: Request) -> Any:
        """GET /chats/{chat_id}/messages: the ChatMessageDTOs, in order."""
        return (await self.chat(request))["chat_messages"]


def chat_routes(store: Store) -> list[Route]:
    """The chat routes over ``store``."""
    api = ChatsApi(store)
    return [
        Route("/chats/{chat_id}", answering(api.chat, agent=True), methods=["GET"]),
        Route("/chats/{chat_id}/messages", answering(api.messages, agent=True), methods=["GET"]),
    ]
