# examples/webhook_starlette.py: a hook webhook as a Starlette (ASGI) app.
# Run: uvicorn webhook_starlette:app --app-dir examples --port 9000, then point a webhook hook
# at http://127.0.0.1:9000/hooks (or: belt trigger agent.turn_start --to http://127.0.0.1:9000/hooks).
import json
import posixpath

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MAX_BODY = 1024 * 1024


def decide(payload: dict) -> dict | None:
    """The policy: the payload as a dict in, a LifecycleHookResponse as a dict (or None) out."""
    data = payload.get("data") or {}
    if payload.get("event") == "agent.turn_start":
        reminder = "Only files under /tmp/ may be deleted."
        return {"inject": {"content": reminder, "ttl_turns": 1, "dedup_key": "delete-policy"}}
    if payload.get("event") == "agent.tool_call" and data.get("tool") == "delete_file":
        path = posixpath.normpath(str((data.get("arguments") or {}).get("path", "")))
        # normpath resolves //, . and .. without touching the disk, but keeps a leading //
        # (POSIX leaves its meaning open; Linux reads it as /).
        if not path.startswith(("/tmp/", "//tmp/")):
            return {"decision": "deny", "reason": "only /tmp deletions allowed"}
    return None  # allow


async def hooks(request: Request) -> Response:
    body = b""
    async for chunk in request.stream():  # read at most MAX_BODY bytes
        body += chunk
        if len(body) > MAX_BODY:
            return JSONResponse({"error": "body too large"}, status_code=413)
    try:
        payload = json.loads(body)
    except ValueError:
        return JSONResponse({"error": "not JSON"}, status_code=400)
    if not isinstance(payload, dict):
        return JSONResponse({"error": "not a JSON object"}, status_code=400)
    return JSONResponse(decide(payload) or {})  # {} (or an empty body) means allow


app = Starlette(routes=[Route("/hooks", hooks, methods=["POST"])])
