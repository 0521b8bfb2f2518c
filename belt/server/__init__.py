"""``belt serve``: a local hook handler and the platform's HTTP API, as one ASGI app.

Starlette and uvicorn are imported only by the modules of this package, and only ``belt serve``
(and the tests) import it.
"""
