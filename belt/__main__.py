"""Allow ``python -m belt``."""

from belt.cli import main

main()
