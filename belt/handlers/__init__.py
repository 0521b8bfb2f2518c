"""Hook handlers: one small module per handler type (webhook, task, gate)."""
