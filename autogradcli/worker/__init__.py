"""The warm worker behind the plain command (docs/worker.md).

``wire``: what the client and the worker share, light enough for the client to import
before it knows whether torch is needed (paths, checks, framing, ``worker status/stop``).
``server``: the worker process itself, which imports torch and SymPy once and answers
each question in a forked child.
"""
