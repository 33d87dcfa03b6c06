"""What every cookbook shares: the bundled data, and the chat model if one is configured.

Set ``LANGCHAIN_EXPAND_CHAT_MODEL`` to a LangChain model name (e.g. ``openai:gpt-4o-mini``,
with that provider's package and key installed) to get real answers. Without it, the
cookbooks print the final prompt and its token count: everything up to the model runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.prompt_values import PromptValue

import langchain_expand
from langchain_expand import TokenCounter, count_prompt_tokens

DATA = Path(langchain_expand.__file__).with_name("data")
"""The slices the package ships for its demo."""


def documents(corpus: str, *, keep_sections: bool = False) -> list[Document]:
    """The bundled slice of ``corpus`` (``qmsum`` or ``emanual``) as Documents."""
    rows = [json.loads(line) for line in (DATA / corpus / "docs.jsonl").open(encoding="utf-8")]
    out = []
    for row in rows:
        meta: dict[str, Any] = {"source": row["doc_id"]}
        if keep_sections and row.get("sections"):
            meta["sections"] = row["sections"]
        out.append(Document(row["text"], id=row["doc_id"], metadata=meta))
    return out


def chat_model() -> Any | None:
    """The configured chat model, or None."""
    name = os.environ.get("LANGCHAIN_EXPAND_CHAT_MODEL")
    if not name:
        return None
    from langchain_classic.chat_models import init_chat_model

    return init_chat_model(name)


def answer(prompt: PromptValue) -> None:
    """Send the prompt to the configured model, or show it with its token count."""
    tokens = count_prompt_tokens(prompt, TokenCounter())
    model = chat_model()
    if model is None:
        print(f"--- final prompt ({tokens} tokens; set LANGCHAIN_EXPAND_CHAT_MODEL to send it) ---")
        print(prompt.to_string())
        return
    print(f"--- answer (prompt: {tokens} tokens) ---")
    print(model.invoke(prompt).content)
