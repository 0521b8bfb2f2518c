"""``belt serve``: a local hook handler and the platform's HTTP API, as one ASGI app (the only
package that imports Starlette and uvicorn)."""
