"""multiturn-eval: conversation-level regression tests for LLM agents.

The public API (stable; fields may be added, none removed or renamed)::

    from multiturn_eval import (
        CaseContext, ConversationContext, ConversationMessage, ConversationTurn, GraderContext,
        GraderResult, PreviousTurn, SessionError, SimulatorContext, TokenUsage, ToolInvocation,
        TurnFile, TurnReply, UserTurn,
    )

Everything else in the package may move between releases.
"""

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .errors import SessionError
    from .types import (
        CaseContext,
        ConversationContext,
        ConversationMessage,
        ConversationTurn,
        GraderContext,
        GraderResult,
        PreviousTurn,
        SimulatorContext,
        TokenUsage,
        ToolInvocation,
        TurnFile,
        TurnReply,
        UserTurn,
    )

__all__ = [
    "CaseContext",
    "ConversationContext",
    "ConversationMessage",
    "ConversationTurn",
    "GraderContext",
    "GraderResult",
    "PreviousTurn",
    "SessionError",
    "SimulatorContext",
    "TokenUsage",
    "ToolInvocation",
    "TurnFile",
    "TurnReply",
    "UserTurn",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: ``python -m multiturn_eval`` installs its signal handlers
    # before pydantic is loaded, so a SIGTERM during start-up is handled too.
    if name == "SessionError":
        from .errors import SessionError

        return SessionError
    if name in __all__:
        from . import types

        return getattr(types, name)
    raise AttributeError(f"module 'multiturn_eval' has no attribute {name!r}")
