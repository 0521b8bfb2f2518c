"""belt's test framework: scenarios with expectations as tests (``belt test``: ``suite``,
``expect``, ``snapshot``, ``coverage``, ``workers``) and the pytest plugin (``plugin``)."""
