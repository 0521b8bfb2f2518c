"""``belt check``: conformance and property-based fuzzing of a hook handler (``run``), of the
``subjects`` a TARGET makes, with the strategies of ``generate``, ``--props`` (``props``), the
``report`` and ``--save`` (``save``)."""
