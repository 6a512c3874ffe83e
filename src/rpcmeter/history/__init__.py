"""The history of runs: the SQLite store and the trends across runs."""
