"""Text: sentences, Markdown blocks, sections, embedding prefixes, token counts, window bounds.

Everything here reads a document's text and nothing else: no store, no budget. Every function
is linear in its input (``tests/test_linear.py``), since a document with one long line must not
be able to stall a query.
"""
