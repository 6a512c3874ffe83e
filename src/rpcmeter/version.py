"""rpcmeter's version (``rpcmeter.__version__``, the result's ``rpcmeter_version``)."""

__version__ = "0.1.0"
