"""Rule files: policies that answer hooks (``policy``) and approval rules that settle gates
(``approvals``), both matching with ``belt.reading.matching``."""
