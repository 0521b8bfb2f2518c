"""belt's test framework: scenarios with expectations as tests (``belt test``) and the pytest
plugin.

- ``expect``: the ``[[expect]]`` tables of a scenario, compiled and checked against a run's
  record;
- ``suite``: finding scenarios, running each, and reporting them (terminal, JSON, JUnit);
- ``plugin``: the pytest plugin (``belt_scenario``, ``belt_serve``), registered by the
  ``pytest11`` entry point.
"""
