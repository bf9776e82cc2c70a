"""The model clients of one run, one per endpoint: the judges' and the simulated users'.

:class:`~multiturn_eval.grading.judges.JudgeService` and
:class:`~multiturn_eval.simulation.calls.SimulatorService` each keep one client per
endpoint (backend, base_url, api_key, api_version) for the whole run, built on first
use or before the run (:meth:`RunClients.prepare`: an SDK import and a TLS context
each), and close them all at its end. A subclass says how one client is built
(:meth:`RunClients._make`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from .retry import Sleep
    from .suite.blocks import FixturesMode

Endpoint = tuple[str, str | None, str, str | None]
"""(backend, base_url, api_key, api_version): one client."""


class _Closable(Protocol):
    async def aclose(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class RunClients(Generic[C]):
    """``fixtures``: the run's fixtures mode (off: none) its clients answer from and record into."""

    def __init__(
        self, *, timeout: float = 120.0, sleep: Sleep | None = None, fixtures: FixturesMode = "off"
    ) -> None:
        self.timeout = timeout
        self._sleep = sleep
        self.fixtures: FixturesMode = fixtures
        self._clients: dict[Endpoint, C] = {}
        self.requests_made = 0
        """Model calls actually started (the tests and the benchmark read it)."""

    def _make(self, endpoint: Endpoint) -> C:
        raise NotImplementedError

    def _client(self, endpoint: Endpoint) -> C:
        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = self._make(endpoint)
        return client

    def prepare(self, endpoints: Iterable[Endpoint]) -> None:
        """Build the clients of these endpoints before the run.

        Importing an SDK and building its client (TLS context included) costs about a
        tenth of a second: paid while loading, as for the agent backends, not by the
        first judged turn or simulated message (under ``--fixtures replay`` neither is
        done: every call is answered from the fixtures; see ``ChatClient.prepare``).
        """
        for endpoint in endpoints:
            self._client(endpoint)

    async def _close_clients(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.aclose()
        self._clients.clear()
