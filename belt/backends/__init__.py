"""The local store or (``--api``) a platform's API, for a command's interrupts and settings."""
