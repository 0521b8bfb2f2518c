"""The chat routes of ``belt serve``: ``GET /chats/{id}`` (the ChatDTO) and its ``/messages``, in
the platform's envelope, errors typed as the agent routes' (the SDKs' agents call them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route

from belt.records.views import chat_dto
from belt.server.problems import answering

if TYPE_CHECKING:
    from belt.store import Store


def chat_routes(store: Store) -> list[Route]:
    """The chat routes over ``store``."""

    async def chat(request: Request) -> Any:
        """GET /chats/{chat_id}: the ChatDTO."""
        chat_id = request.path_params["chat_id"]
        return await run_in_threadpool(chat_dto, store, chat_id, public=True)

    async def messages(request: Request) -> Any:
        """GET /chats/{chat_id}/messages: the ChatMessageDTOs, in order."""
        return (await chat(request))["chat_messages"]

    return [
        Route("/chats/{chat_id}", answering(chat, agent=True), methods=["GET"]),
        Route("/chats/{chat_id}/messages", answering(messages, agent=True), methods=["GET"]),
    ]
