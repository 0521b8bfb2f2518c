"""Reading what a user names and writes: files and options, each capped (``inputs``), strict
JSON and TOML (``strictjson``), the patterns values are matched with (``matching``) and the "did
you mean" of a misspelt name (``didyoumean``)."""
