"""``python -m rpcmeter.cli``: the same as the ``rpcmeter`` command."""

import sys

from rpcmeter.cli.app import main

sys.exit(main())
