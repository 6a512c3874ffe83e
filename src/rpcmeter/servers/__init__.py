"""Server processes: lifecycle (:mod:`rpcmeter.servers.process`) and built-in reference servers,
one module per protocol, each runnable as ``python -m rpcmeter.servers.<protocol>_server``."""
