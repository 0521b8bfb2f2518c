"""Hook handlers: webhooks (``webhook``) and in-process ``py:`` handlers (``inprocess``)."""
