"""A tiny dataflow for rpcmeter's whole-command example (study 003's shape).

``python -m busy_polling.flow`` starts ``--workers`` worker processes. Each takes ``--items``
items from its own partition of the input and maps them. Two switches, as in the study:

- ``--long-input true``: the input has a new item only every ``--interval`` seconds and answers
  "nothing yet" in between; a worker polls it again until the item is there;
- ``--heavy-map true``: mapping an item burns ``--heavy-s`` seconds of CPU.

How a worker waits between two polls is the behaviour under test: it parks for ``PARK_S``
seconds (the fixed behaviour) or, with ``PARK_S = 0``, polls again at once and spins a CPU at 100 %
while it waits (the bug). ``BUSY_POLLING_PARK_S`` in the environment overrides ``PARK_S``.
"""

PARK_S = 0.001
