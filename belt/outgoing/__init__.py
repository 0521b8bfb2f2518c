"""What belt sends out: every HTTP call through one transport (``transport``), Standard
Webhooks signatures (``signing``) and hook traces as OpenTelemetry spans (``tracing``)."""
