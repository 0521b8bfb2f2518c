"""One httpx client for tests' requests to the servers they start, made once: making one (its TLS
context) costs about 20 ms of CPU, which ``httpx.post`` and the like pay on every call. Each
request is still one of its own, as with ``httpx.post``: a connection of its own (none is kept),
no cookie kept, no limit on connections at once."""

from __future__ import annotations

import atexit
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

CLIENT = httpx.Client(
    limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
    cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
)
atexit.register(CLIENT.close)
