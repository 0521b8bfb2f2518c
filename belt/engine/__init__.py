"""The simulated agent loop: scenarios, hook dispatch, decisions, gates, and the record."""
