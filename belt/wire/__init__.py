"""Wire models of both hook dialects, spelled exactly as on the wire."""
