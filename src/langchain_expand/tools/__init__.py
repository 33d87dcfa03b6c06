"""Tools over the library: the budget report, the ``langchain-expand`` command and corpus reading.

They stand on the retrievers and are never imported by them.
"""
