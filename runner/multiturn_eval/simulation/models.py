"""The pydantic models of a simulated user in the suite file: ``user_simulator:`` and ``user:``.

They live in :mod:`multiturn_eval.suite.users` (``Suite.user_simulator`` and
``TestCase.user`` take them), and are re-exported here for the simulation
package. The rules that need more than one block are in :mod:`.config`.
"""

from __future__ import annotations

from ..suite.users import (
    DEFAULT_BACKEND,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    FLAG_KEYS,
    MODEL_KEYS,
    NOT_PYTHON,
    OPENAI_ONLY,
    PYTHON_ONLY,
    SimulatorBackend,
    SimulatorConfig,
    UserConfig,
    UserSimulatorConfig,
)

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MAX_TURNS",
    "FLAG_KEYS",
    "MODEL_KEYS",
    "NOT_PYTHON",
    "OPENAI_ONLY",
    "PYTHON_ONLY",
    "SimulatorBackend",
    "SimulatorConfig",
    "UserConfig",
    "UserSimulatorConfig",
]
