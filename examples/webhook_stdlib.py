# examples/webhook_stdlib.py: a hook webhook with nothing but the standard library.
# Run: python examples/webhook_stdlib.py 9000, then point a webhook hook at
# http://127.0.0.1:9000/hooks (or: belt trigger agent.tool_call --to http://127.0.0.1:9000/hooks).
# With WEBHOOK_SECRET=whsec_... set, only requests signed with it are answered.
import base64
import hashlib
import hmac
import json
import os
import posixpath
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("WEBHOOK_SECRET", "")
MAX_BODY = 1024 * 1024  # the platform's payloads are far smaller; refuse what is not


def decide(payload: dict) -> dict | None:
    """The policy: the payload as a dict in, a LifecycleHookResponse as a dict (or None) out."""
    data = payload.get("data") or {}
    if payload.get("event") == "agent.tool_call" and data.get("tool") == "delete_file":
        path = posixpath.normpath(str((data.get("arguments") or {}).get("path", "")))
        # normpath resolves //, . and .. without touching the disk, but keeps a leading //
        # (POSIX leaves its meaning open; Linux reads it as /).
        if not path.startswith(("/tmp/", "//tmp/")):
            return {"decision": "deny", "reason": "only /tmp deletions allowed"}
    return None  # allow


def signed(headers, body: bytes) -> bool:
    """Standard Webhooks: v1,<base64 HMAC-SHA256 of id.timestamp.body>, 5 minutes of skew."""
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not (msg_id and stamp.isdigit() and abs(time.time() - int(stamp)) <= 300):
        return False
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(digest).decode()
    given = headers.get("webhook-signature", "").split()
    return any(hmac.compare_digest(expected, signature) for signature in given)


class Hooks(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if not 0 < length <= MAX_BODY:
            return self.answer(413 if length else 400, {"error": "bad body length"})
        body = self.rfile.read(length)
        if SECRET and not signed(self.headers, body):
            return self.answer(401, {"error": "bad or missing signature"})
        try:
            payload = json.loads(body)
        except ValueError:
            return self.answer(400, {"error": "not JSON"})
        if not isinstance(payload, dict):
            return self.answer(400, {"error": "not a JSON object"})
        self.answer(200, decide(payload) or {})  # {} (or an empty body) means allow

    def answer(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def server(port: int) -> ThreadingHTTPServer:
    """The server on 127.0.0.1:port (0 picks a free port); call serve_forever() on it."""
    return ThreadingHTTPServer(("127.0.0.1", port), Hooks)


if __name__ == "__main__":
    server(int(sys.argv[1]) if len(sys.argv) > 1 else 9000).serve_forever()
