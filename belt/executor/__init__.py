"""The Nexus executor: the inbox of durable hook tasks (``inbox``), the tools a worker runs
(``targets``) and the worker that claims and completes tasks (``worker``)."""
