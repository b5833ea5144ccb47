"""``python -m sparkmirror_cli``: the same as the ``sparkmirror`` command."""

import sys

from sparkmirror_cli.main import main

sys.exit(main())
