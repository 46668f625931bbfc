"""``python -m emubroker.admin_cli ...``: the same as ``emubroker admin ...``."""

from __future__ import annotations

import sys

from emubroker.admin_cli.main import main

sys.exit(main())
