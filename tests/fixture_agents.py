"""Python agents that call a model themselves, as teams' agents do: what ``--fixtures`` must
record and replay for the ``python`` backend (their own httpx clients, routed per test case).

- :func:`openai_agent`: an ``openai.AsyncOpenAI`` client (the SDK, on httpx2) made in the
  factory, one conversation per session; ``options.base_url`` says where, the key comes
  from ``OPENAI_API_KEY`` if set (a replayed call needs none).
- :func:`streaming_agent`: a *sync* agent (its ``send`` runs on a thread) that streams a
  Chat Completions reply through a plain ``httpx.Client`` and joins the deltas.
- :func:`http_customer`: a python *simulated user* that asks a model for each message
  through a plain ``httpx.Client`` (recorded as the ``user`` side's calls).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import httpx
import openai

from multiturn_eval import CaseContext, ConversationMessage, SimulatorContext, UserTurn


class OpenAIAgent:
    def __init__(self, ctx: CaseContext) -> None:
        options = ctx.agent["options"]
        self.client = openai.AsyncOpenAI(
            base_url=options["base_url"],
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
            max_retries=0,
        )
        self.history: list[dict[str, Any]] = [
            {"role": "system", "content": ctx.instructions or "You are helpful."}
        ]

    async def send(self, message: str) -> str:
        self.history.append({"role": "user", "content": message})
        reply = await self.client.chat.completions.create(
            model="gpt-test",
            messages=self.history,  # type: ignore[arg-type]
        )
        text = reply.choices[0].message.content or ""
        self.history.append({"role": "assistant", "content": text})
        return text

    async def close(self) -> None:
        await self.client.close()


def openai_agent(ctx: CaseContext) -> OpenAIAgent:
    return OpenAIAgent(ctx)


class StreamingAgent:
    def __init__(self, ctx: CaseContext) -> None:
        self.base_url = str(ctx.agent["options"]["base_url"])
        self.history: list[dict[str, Any]] = []

    def send(self, message: str) -> str:
        self.history.append({"role": "user", "content": message})
        said = ""
        with (
            httpx.Client(base_url=self.base_url, timeout=10) as client,
            client.stream(
                "POST",
                "/chat/completions",
                json={"model": "gpt-test", "messages": self.history, "stream": True},
            ) as response,
        ):
            response.raise_for_status()
            for line in response.iter_lines():
                data = line.removeprefix("data: ")
                if not line.startswith("data: ") or data == "[DONE]":
                    continue
                said += json.loads(data)["choices"][0]["delta"].get("content") or ""
        self.history.append({"role": "assistant", "content": said})
        return said


def streaming_agent(ctx: CaseContext) -> StreamingAgent:
    return StreamingAgent(ctx)


class HttpCustomer:
    """A python simulated user that asks a model for each message itself, through ``httpx``
    (``context: {base_url}``: an Anthropic Messages endpoint); it ends after two replies."""

    def __init__(self, ctx: SimulatorContext) -> None:
        self.base_url = str(ctx.context["base_url"])

    def next_message(self, conversation: Sequence[ConversationMessage]) -> str | UserTurn:
        replies = [m.text for m in conversation if m.role == "agent"]
        if len(replies) >= 2:
            return UserTurn(message=None, done=True, outcome="goal_met")
        said = replies[-1] if replies else "hello"
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            response = client.post(
                "/v1/messages",
                headers={"anthropic-version": "2023-06-01"},
                json={
                    "model": "claude-haiku-4-5",
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": f"customer, after: {said}"}],
                },
            )
            response.raise_for_status()
            return str(response.json()["content"][0]["text"])


def http_customer(ctx: SimulatorContext) -> HttpCustomer:
    return HttpCustomer(ctx)
