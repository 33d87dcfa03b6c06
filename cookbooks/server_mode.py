"""Server mode: a Chroma server and a SQL docstore, shared by every process that indexes or asks.

Starts ``chroma run`` on a free loopback port (in production it runs on its own host),
indexes windows and parents into it, restarts it, and asks again. The docstore is a
SQLAlchemy URL: SQLite here, ``postgresql+psycopg://user:pass@host/db`` for a shared one
(set ``LANGCHAIN_EXPAND_DOCSTORE_URL``). Several indexing workers can then each run
``add_documents`` on their own share of the corpus against the same server and database.

Run: ``.venv/bin/python cookbooks/server_mode.py``
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chromadb
from _common import documents

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    chroma_store,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_chroma(path: str, port: int) -> subprocess.Popen[bytes]:
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    server = subprocess.Popen(
        [chroma, "run", "--path", path, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return server
        except Exception:
            time.sleep(0.1)
    server.kill()
    msg = "chroma run did not start"
    raise RuntimeError(msg)


home = tempfile.mkdtemp()
port = free_port()
docstore_url = os.environ.get("LANGCHAIN_EXPAND_DOCSTORE_URL", f"sqlite:///{home}/parents.sqlite")


def retrievers() -> tuple[SentenceWindowRetriever, BudgetedParentDocumentRetriever]:
    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    windows = SentenceWindowRetriever(vectorstore=chroma_store("sentences", client=client), k=2)
    parents = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("children", client=client),
        docstore=SQLDocStore(docstore_url),
        parent_splitter=MarkdownSectionSplitter(max_level=2),
        k=2,
    )
    return windows, parents


server = start_chroma(f"{home}/chroma", port)
try:
    windows, parents = retrievers()
    windows.add_documents(documents("qmsum"))
    parents.add_documents(documents("emanual"))
    before = [d.page_content for d in windows.invoke("remote control price")]
    print(f"indexed into chroma at 127.0.0.1:{port} and {docstore_url.split('://')[0]}")
finally:
    server.terminate()
    server.wait()

server = start_chroma(f"{home}/chroma", port)  # a restart: nothing is lost
try:
    windows, parents = retrievers()
    after = [d.page_content for d in windows.invoke("remote control price")]
    print(f"after a server restart, the same windows: {before == after}")
    for p in parents.invoke("How do I charge another device wirelessly?"):
        print(f"  parent: {' > '.join(p.metadata['headings'])} ({p.metadata['tokens']} tokens)")
finally:
    server.terminate()
    server.wait()
