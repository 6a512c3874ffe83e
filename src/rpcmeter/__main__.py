"""``python -m rpcmeter``: the same as the ``rpcmeter`` command."""

import sys

from rpcmeter.cli import main

sys.exit(main())
