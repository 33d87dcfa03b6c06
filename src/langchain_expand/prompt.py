"""The context as a prompt holds it: units formatted into one string, and what a context or a prompt costs.

:func:`~langchain_expand.budget.fit_to_budget` counts what :func:`render` makes of the units it
keeps; :func:`context_tokens` counts the same string for anyone who measures a context (the
budget report, the CLI), so a figure and the budget it is held to are one count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue, StringPromptValue

from langchain_expand.units import DOC_ID, END, SOURCE, START

__all__ = ["Formatter", "context_tokens", "count_prompt_tokens", "format_docs", "render"]

Formatter = Callable[[Sequence[Document]], str]
"""Builds the context string from the units; it is what a budget counts."""

MESSAGE_OVERHEAD = 4
"""Tokens of framing per chat message (role and separators), as OpenAI's chat format counts."""
REPLY_OVERHEAD = 3
"""Tokens that prime the assistant's reply in OpenAI's chat format."""


def format_docs(documents: Sequence[Document], *, separator: str = "\n\n", labels: bool = True) -> str:
    """Join units into one context string, each under a source label.

    Args:
        documents: The units, in the order they should appear.
        separator: What stands between units; count with the same one in ``FitToBudget``.
        labels: Put ``[n] doc_id (chars start-end)`` above each unit.
    """
    if not labels:
        return separator.join(d.page_content for d in documents)
    blocks = []
    for n, doc in enumerate(documents, 1):
        m = doc.metadata
        where = f" (chars {m[START]}-{m[END]})" if START in m and END in m else ""
        blocks.append(f"[{n}] {m.get(DOC_ID, m.get(SOURCE, doc.id or '?'))}{where}\n{doc.page_content}")
    return separator.join(blocks)


def context_tokens(
    documents: Sequence[Document],
    counter: Callable[[str], int],
    *,
    separator: str = "\n\n",
    formatter: Formatter | None = None,
) -> int:
    """Tokens of the context ``documents`` make, joined and counted as :func:`fit_to_budget` does."""
    return counter(render(separator, formatter)(documents))


def count_prompt_tokens(prompt: PromptValue, counter: Callable[[str], int]) -> int:
    """Tokens of a rendered prompt: its text, or for chat, each message plus its framing."""
    if isinstance(prompt, StringPromptValue):
        return counter(prompt.to_string())
    return REPLY_OVERHEAD + sum(_message_tokens(m, counter) for m in prompt.to_messages())


def _message_tokens(message: BaseMessage, counter: Callable[[str], int]) -> int:
    name = message.name or ""
    return MESSAGE_OVERHEAD + counter(message.text) + (counter(name) if name else 0)


def render(separator: str, formatter: Formatter | None) -> Formatter:
    """What the budget counts: the formatter's output, else the contents joined."""
    return formatter or (lambda docs: separator.join(d.page_content for d in docs))
