"""belt: declare, check, serve and simulate agent lifecycle hooks."""

__version__ = "0.1.0"
