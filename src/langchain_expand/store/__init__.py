"""Storage: the vector-store adapter, the commit protocol, records, the lexical index, the docstore, the defaults.

The retrievers write under one commit protocol (:mod:`.commit`) through one face for every
vector store (:mod:`.adapters`), read back :mod:`.records`, rank words with BM25 beside the
store (:mod:`.lexical`, :mod:`.pglexical`), and open the embedded defaults (:mod:`.defaults`:
Chroma, MiniLM). Nothing here knows about windows, parents or budgets.
"""
