"""What a remote backend reads off the wire, bounded and checked before anything parses it.

Shared by the ``anthropic``, ``openai``, ``semantic-kernel`` and ``http``
backends and the judges, on the ``httpx2`` clients they build (the SDKs' own
clients included, through ``http_client=``, :func:`checked_client`):

* **a size cap**: no reply body larger than :data:`MAX_REPLY_BYTES` (10 MiB)
  is read. A ``content-length`` above it is refused before the body is read;
  a body without one stops being read at the cap. The cap is far above any
  real reply (a Messages API reply of ``max_tokens = 128000`` is well under
  2 MB) and bounds the work and memory one reply can cost;
* **a shape check** of every 2xx body (:func:`response_hook`), run on the raw
  bytes before the SDK turns them into objects. SDKs accept any 200 (an HTML
  page becomes a ``str``, a JSON object of the wrong shape a half-built
  model), and what fails later is an ``AttributeError`` deep in a tool loop.
  The check fails such a reply at once, saying what is wrong with it and
  quoting a short excerpt (:func:`excerpt`: at most 200 characters, control
  characters removed, one line). It also bounds the parsing work: a body of
  millions of tiny content blocks takes the SDK tens of seconds of CPU in the
  event loop, where no ``turn_timeout`` can interrupt it; more than
  :data:`MAX_ITEMS` blocks, choices or tool calls is refused unparsed.

Both raise a :class:`ReplyProblem` inside the HTTP client; the SDK wraps it
(``APIConnectionError``) and the one translation of the SDKs' failures
(:func:`multiturn_eval.backends.chat.translate`; the http backend's own)
finds it in the cause chain. Such a reply is a turn error, never retried (the same
request would most likely get the same reply), and the session stays alive:
the backend's history does not change on a failed turn, so the next turn is
sent on the conversation as it was.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

#: the largest reply body read (bytes, after decompression too)
MAX_REPLY_BYTES = 10 * 1024 * 1024
#: the most content blocks / choices / tool calls / tool invocations one reply may hold
MAX_ITEMS = 10_000
#: the longest quote of a reply in an error message (characters)
EXCERPT_CHARS = 200
#: where :func:`response_hook` keeps a checked 2xx body's parsed JSON (``response.extensions``)
PARSED = "multiturn_eval.parsed_json"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_SPACES = re.compile(r"\s{2,}")


class ReplyProblem(Exception):
    """A reply that is not what the API promises (internal: translated by each backend)."""

    def __init__(self, reason: str, body: bytes | str | None = b"") -> None:
        super().__init__(reason)
        self.reason = reason
        self.excerpt: str | None = (
            None if body is None else excerpt(body) if body else "an empty body"
        )
        """None when the body was not read."""

    def describe(self, what: str) -> str:
        """``<what> (<reason>): <excerpt>`` -- the sentence every backend puts in the turn error."""
        quoted = f": {self.excerpt}" if self.excerpt is not None else ""
        return f"{what} ({self.reason}){quoted}"


class ReplyTooLarge(ReplyProblem):
    """A reply body over :data:`MAX_REPLY_BYTES`."""


def mib(size: int) -> str:
    """``10 MB``, ``52.4 MB``: a size in MiB for messages."""
    value = size / 1024 / 1024
    return f"{value:g} MB" if value == int(value) else f"{value:.1f} MB"


def excerpt(
    data: bytes | str, limit: int = EXCERPT_CHARS, redact: Callable[[str], str] | None = None
) -> str:
    """A short, single-line, quoted excerpt of ``data`` (bytes decoded leniently).

    ``redact`` (secrets to ``***``) runs before the cut, so no secret is half shown.
    """
    head = data[: limit * 8]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    text = _CONTROL.sub(" ", text)
    if redact is not None:
        text = redact(text)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``null``, ...)."""
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def load_json(body: bytes) -> Any:
    """The parsed body, or a ReplyProblem saying why it is not JSON."""
    if not body.strip():
        raise ReplyProblem("an empty body", body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReplyProblem(f"the body is not UTF-8 text (byte {exc.start})", body) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ReplyProblem("the JSON is nested too deeply", body) from None
    except ValueError as exc:
        raise ReplyProblem(f"not JSON: {exc}", body) from None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.cache
def _capped_stream() -> type:
    """The stream class below, built on first use: ``httpx2`` (about 30 ms of imports) is
    imported by the first live request, never by a run whose calls are all replayed."""
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        """The response's raw bytes, stopping with ReplyTooLarge past ``limit``."""

        def __init__(self, inner: Any, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def __aiter__(self) -> Any:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > self._limit:
                    raise ReplyTooLarge(
                        f"the body is larger than {mib(self._limit)}; stopped reading there",
                        chunk,
                    )
                yield chunk

        async def aclose(self) -> None:
            close = getattr(self._inner, "aclose", None)
            if close is not None:
                await close()

    return CappedStream


#: checks a 2xx reply's parsed JSON body: a reason it is wrong, or None
Check = Callable[[Any], str | None]


def response_hook(
    check: Check | None, *, limit: int = MAX_REPLY_BYTES
) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An ``httpx2`` response event hook: caps every body; reads and checks 2xx bodies.

    Runs before the client reads the body (httpx calls response hooks first),
    so the SDK only ever parses a reply that passed.
    """

    async def hook(response: httpx2.Response) -> None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await response.aclose()
            raise ReplyTooLarge(
                f"the body is {mib(int(length))}, over the {mib(limit)} cap; not read", None
            )
        response.stream = _capped_stream()(response.stream, limit)
        # Read the body here, counting *decoded* bytes: a 10 MB gzip body can expand a
        # thousandfold, and a check after reading it whole would come too late. The SDK then
        # gets the body already read (every status: error bodies are read too).
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                await response.aclose()
                raise ReplyTooLarge(f"the body decompresses to more than {mib(limit)}", chunk)
            chunks.append(chunk)
        body = b"".join(chunks)
        response._content = body  # what aread() would have kept: the SDK reads this
        if check is None or not 200 <= response.status_code < 300:
            return
        data = load_json(body)
        reason = check(data)
        if reason is not None:
            raise ReplyProblem(reason, body)
        # the checked body, parsed: a backend that reads the raw response needs no second parse
        response.extensions = {**response.extensions, PARSED: data}

    return hook


def checked_client(sdk: Any, check: Check | None, transport: str = "httpx") -> Any:
    """The HTTP client for ``sdk`` (``anthropic`` or ``openai``) with :func:`response_hook`.

    ``transport``: ``httpx`` (the SDK's default client), or ``auto``: the SDK's
    aiohttp client when ``aiohttp`` is installed (same SDK, same wire bytes;
    aiohttp parses HTTP in C), else the httpx one.
    """
    hooks = {"response": [response_hook(check)]}
    if transport == "auto" and importlib.util.find_spec("aiohttp") is not None:
        aio = getattr(sdk, "DefaultAioHttpClient", None)
        if aio is not None:
            try:
                return aio(event_hooks=hooks)
            except Exception:  # an SDK whose aiohttp client cannot be built here: httpx then
                pass
    return sdk.DefaultAsyncHttpxClient(event_hooks=hooks)


def parsed_body(response: httpx2.Response) -> Any:
    """The JSON body :func:`response_hook` checked (parsed again if the hook did not run)."""
    if PARSED in response.extensions:
        return response.extensions[PARSED]
    return load_json(response.content)


def find_in_chain(
    exc: BaseException, types: tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first exception of ``types`` in ``exc``'s cause/context chain (SDKs wrap errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, types):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def find_problem(exc: BaseException) -> ReplyProblem | None:
    """The ReplyProblem in ``exc``'s cause/context chain (SDKs wrap what the hook raised)."""
    found = find_in_chain(exc, (ReplyProblem,))
    return found if isinstance(found, ReplyProblem) else None


# ------------------------------------------------------------- Chat Completions replies


def chat_choice(data: Any) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """A Chat Completions body's one choice and its message, or why it has none.

    The envelope both OpenAI-compatible backends read (``openai``,
    ``semantic-kernel``): an object with exactly one entry in ``choices`` (the
    runner never asks for more) whose ``message`` is an object. What each
    backend reads inside the message it checks itself.
    """
    if not isinstance(data, dict):
        return f"a JSON {json_type(data)}, not a chat completion object"
    choices = data.get("choices")
    if not isinstance(choices, list):
        return "no 'choices'" if "choices" not in data else f"'choices' is {json_type(choices)}"
    if len(choices) != 1:
        return f"'choices' has {len(choices)} entries; the request asked for one"
    choice = choices[0]
    if not isinstance(choice, dict):
        return f"choices[0] is a JSON {json_type(choice)}, not an object"
    message = choice.get("message")
    if not isinstance(message, dict):
        return f"choices[0].message is {json_type(message)}, not an object"
    return choice, message


def chat_tail_problem(
    data: dict[str, Any], choice: dict[str, Any], details: Sequence[tuple[str, str]] = ()
) -> str | None:
    """Why a Chat Completions body's ``finish_reason`` or ``usage`` is unreadable, or None.

    ``usage``, when present, is an object with whole ``prompt_tokens`` and
    ``completion_tokens``; ``details`` names the nested counts a backend reads
    too (``("prompt_tokens_details", "cached_tokens")``).
    """
    reason = choice.get("finish_reason")
    if reason is not None and not isinstance(reason, str):
        return f"choices[0].finish_reason is {json_type(reason)}"
    usage = data.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"'usage' is {json_type(usage)}, not an object"
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is not None and (not is_int(value) or value < 0):
            return f"usage.{key} is {json_type(value)}, not a whole number"
    for parent, key in details:
        nested = usage.get(parent)
        if nested is None:
            continue
        if not isinstance(nested, dict):
            return f"usage.{parent} is {json_type(nested)}, not an object"
        value = nested.get(key)
        if value is not None and (not is_int(value) or value < 0):
            return f"usage.{parent}.{key} is {json_type(value)}, not a whole number"
    return None
