"""`python -m verify_tf` runs the CLI."""

from .cli import main

main()
