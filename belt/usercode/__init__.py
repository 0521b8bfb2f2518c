"""A user's Python: loaded from a ``MODULE:FUNC`` reference (``loader``) and run in supervised
worker processes (``supervisor``), never in belt's own."""
