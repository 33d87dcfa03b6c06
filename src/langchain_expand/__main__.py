"""``python -m langchain_expand``: the ``langchain-expand`` command."""

import sys

from langchain_expand.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
