"""Code graders used by the engine tests."""

from __future__ import annotations

from multiturn_eval import GraderContext, GraderResult

NOT_CALLABLE = 42


def exact(ctx: GraderContext) -> bool:
    return ctx.agent_response == ctx.ground_truth


def half(ctx: GraderContext) -> float:
    return 0.5


def explains(ctx: GraderContext) -> GraderResult:
    ok = ctx.agent_response.startswith("ok")
    return GraderResult(
        score=1.0 if ok else 0.0,
        reason="starts with ok" if ok else "does not start with ok",
        details={"turn": ctx.turn_index},
    )


def boom(ctx: GraderContext) -> bool:
    raise KeyError("missing")


def bad_type(ctx: GraderContext) -> str:
    return "yes"


def history(ctx: GraderContext) -> GraderResult:
    """Passes when the previous turns' responses are visible, in order."""
    seen = [p.response for p in ctx.previous_turns]
    return GraderResult(
        score=1.0,
        passed=[p.turn_index for p in ctx.previous_turns] == list(range(ctx.turn_index)),
        details={
            "previous": seen,
            "turn_config": dict(ctx.turn_config),
            "case": dict(ctx.case_context),
        },
    )


async def async_grader(ctx: GraderContext) -> bool:
    return True
