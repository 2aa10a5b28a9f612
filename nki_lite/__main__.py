"""`python -m nki_lite ...` is the `nki-lite` command (nki_lite/cli.py)."""
import sys

from .cli import main

sys.exit(main())
