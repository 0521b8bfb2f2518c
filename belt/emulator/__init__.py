"""The platform's agent routes as ``belt serve`` emulates them, above the engine that drives
each run.

- ``conversation``: emulated chats, one message (one run) at a time, driven in the background and
  continued once what holds them is settled;
- ``agents``: the agents an application names (``--agents DIR`` template files, or the ad-hoc
  ``agent_config`` of a request), with their hooks and tools;
- ``modelscript``: what the emulated model answers (``--model FILE``).
"""
