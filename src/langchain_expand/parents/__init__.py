"""Parent-document retrieval: children matched, their enclosing parents returned, within a budget."""

from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever

__all__ = ["BudgetedParentDocumentRetriever"]
