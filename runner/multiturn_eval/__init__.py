"""multiturn-eval: conversation-level regression tests for LLM agents.

The public API (stable; fields may be added, none removed or renamed)::

    from multiturn_eval import (
        CaseContext, GraderContext, GraderResult, PreviousTurn, SessionError,
        TokenUsage, ToolInvocation, TurnFile, TurnReply,
    )

Everything else in the package may move between releases.
"""

from ._version import __version__
from .errors import SessionError
from .types import (
    CaseContext,
    GraderContext,
    GraderResult,
    PreviousTurn,
    TokenUsage,
    ToolInvocation,
    TurnFile,
    TurnReply,
)

__all__ = [
    "CaseContext",
    "GraderContext",
    "GraderResult",
    "PreviousTurn",
    "SessionError",
    "TokenUsage",
    "ToolInvocation",
    "TurnFile",
    "TurnReply",
    "__version__",
]
