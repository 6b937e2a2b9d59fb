"""``python -m cobalt`` is the ``cobalt`` command."""
import sys

from cobalt.cli import main

sys.exit(main())
