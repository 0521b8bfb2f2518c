"""Where a command's interrupts, chat settings and profile live: the local store or a
platform's API, chosen by ``--api`` (``backend``), and the platform API's client (``remote``)."""
