"""``belt check``: conformance and property-based fuzzing of a hook handler.

- ``subjects``: what a TARGET (URL, ``py:``, hooks file, ``--executor``) makes to check;
- ``generate``: the Hypothesis strategies of payloads and Nexus inputs (imports Hypothesis);
- ``props``: ``--props FILE``, the properties of a policy;
- ``run``: the checks, driven by Hypothesis's engine, and their shrunk failures;
- ``report``: the report, its JSON and JUnit forms, and the reproducer commands;
- ``save``: ``--save DIR``, failures written as ``belt test`` scenarios.
"""
