"""Both retrievers against a real Chroma server on loopback, stopped and restarted."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    chroma_store,
)

from .conftest import as_documents, load_docs

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server


class ChromaServer:
    def __init__(self, path: Path) -> None:
        self.path = path
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
        self.process = subprocess.Popen(
            [chroma, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.client().heartbeat()
                return
            except Exception:
                time.sleep(0.1)
        self.stop()
        pytest.fail("chroma run did not answer within 30 s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def client(self) -> chromadb.ClientAPI:
        return chromadb.HttpClient(host="127.0.0.1", port=self.port)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ChromaServer]:
    running = ChromaServer(tmp_path / "chroma")
    running.start()
    yield running
    running.stop()


def test_windows_and_parents_survive_a_server_restart(server: ChromaServer, tmp_path: Path, minilm: Embeddings) -> None:
    docstore_url = f"sqlite:///{tmp_path}/parents.sqlite"

    def build() -> tuple[SentenceWindowRetriever, BudgetedParentDocumentRetriever]:
        client = server.client()
        windows = SentenceWindowRetriever(vectorstore=chroma_store("sentences", client=client, embeddings=minilm), k=3)
        parents = BudgetedParentDocumentRetriever(
            vectorstore=chroma_store("children", client=client, embeddings=minilm),
            docstore=SQLDocStore(docstore_url),
            parent_splitter=MarkdownSectionSplitter(max_level=2),
            k=3,
        )
        return windows, parents

    windows, parents = build()
    windows.add_documents(as_documents(load_docs("qmsum")))
    parents.add_documents(as_documents(load_docs("emanual"), key="source"))  # title: the sections'
    first_windows = [d.page_content for d in windows.invoke("the remote control budget", before=3, after=1)]
    first_parents = [d.metadata["parent_id"] for d in parents.invoke("pair the remote with the TV")]
    assert len(first_windows) == 3
    assert len(first_parents) == 3

    server.stop()
    server.start()
    windows, parents = build()
    assert [d.page_content for d in windows.invoke("the remote control budget", before=3, after=1)] == first_windows
    assert [d.metadata["parent_id"] for d in parents.invoke("pair the remote with the TV")] == first_parents
    # re-indexing against the server is idempotent: nothing new is stored
    count = server.client().get_collection("sentences").count()
    windows.add_documents(as_documents(load_docs("qmsum")))
    assert server.client().get_collection("sentences").count() == count
