"""llm_connect: grade with LLM judges you can trust."""

from .core import BudgetTracker, LLMResponse, RunConfig

__all__ = ["BudgetTracker", "LLMResponse", "RunConfig"]
__version__ = "0.1.0"
