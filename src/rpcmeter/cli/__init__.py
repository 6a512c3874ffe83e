"""The ``rpcmeter`` command line: parse arguments, call the library, map errors to exit codes.

One module per command (or family of commands), each with an ``add_parser(sub)`` that builds its
arguments and the function that runs it. A command module imports only light modules at its top
(argparse, :mod:`rpcmeter.cli.options`, :mod:`rpcmeter.names`); what a command runs it imports
when it runs, so ``rpcmeter --version`` and every ``--help`` answer without loading the
measurement, statistics or plotting code. :mod:`rpcmeter.cli.app` builds the parser and
dispatches.
"""

from rpcmeter.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
