"""Reading a reply body: incrementally, decoded here (gzip, deflate) with its output bounded, so a gzip bomb or an
endless body fails fast instead of filling memory (:func:`_read_body`, capped at :data:`MAX_RESPONSE_BYTES` by
default); and the provider's own words from an error body (:func:`_provider_message`).
"""

from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

__all__ = ["MAX_RESPONSE_BYTES"]

_PROVIDER_MESSAGE_MAX = 500
#: The default cap on a reply body, in bytes after gzip/deflate decoding (16 MiB); ``max_response_bytes=`` changes it.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_ERROR_BODY_MAX = 64 * 1024  # an error body is read this far at most: its message is cut to 500 characters anyway
_READ_CHUNK = 64 * 1024
_ACCEPT_ENCODING = "gzip, deflate"  # what _Decoder decodes; aiohttp's own (unbounded) decompression is off


class _BodyError(Exception):
    """A reply body that cannot be decoded (its message holds none of the body)."""


class _Decoder:
    """Incremental gzip / deflate decoding whose output is bounded at every step, so a bomb never inflates."""

    __slots__ = ("_encoding", "_started", "_zlib")

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        # gzip (or zlib-wrapped, told apart by the header); deflate is zlib-wrapped, or raw (see decode)
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | (32 if encoding != "deflate" else 0))
        self._started = False

    @classmethod
    def for_header(cls, header: str) -> _Decoder | None:
        encoding = header.strip().lower()
        if encoding in ("", "identity"):
            return None
        if encoding in ("gzip", "x-gzip", "deflate"):
            return cls(encoding)
        raise _BodyError(
            f"the body is encoded as {_truncate(header, 40)!r}, which this client does not decode "
            f"(it asks for {_ACCEPT_ENCODING})"
        )

    def decode(self, chunk: bytes, max_out: int) -> bytes:
        """Decode ``chunk``, giving at most ``max_out`` bytes (the caller stops once over its cap)."""
        if not self._started and chunk:
            self._started = True
            if self._encoding == "deflate" and chunk[0] & 0x0F != 8:  # no zlib header: raw deflate
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            return self._zlib.decompress(chunk, max(1, max_out))
        except zlib.error as exc:
            raise _BodyError(f"the {self._encoding} body cannot be decoded ({exc})") from None

    def finish(self) -> None:
        if not self._zlib.eof:
            raise _BodyError(f"the {self._encoding} body ends early (truncated)")


async def _read_body(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """The body, decoded, at most ``limit`` bytes, and whether there was more (left unread).

    Read a chunk at a time and decoded here with bounded output, so neither a
    gzip bomb nor an endless body holds more than about ``limit`` bytes.
    Raises :class:`_BodyError` for an encoding it cannot decode.
    """
    decoder = _Decoder.for_header(resp.headers.get("Content-Encoding", ""))
    if decoder is None and resp.content_length is not None and resp.content_length > limit:
        return b"", True
    out = bytearray()
    wire = 0
    async for chunk in resp.content.iter_chunked(_READ_CHUNK):
        wire += len(chunk)
        out += chunk if decoder is None else decoder.decode(chunk, limit + 1 - len(out))
        # the wire bound stops an endless compressed stream that decodes to (almost) nothing
        if len(out) > limit or wire > 2 * limit + _READ_CHUNK:
            return bytes(memoryview(out)[:limit]), True  # one copy, not two
    if decoder is not None:
        decoder.finish()
    return bytes(out), False


def _truncate(text: str, limit: int = _PROVIDER_MESSAGE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _provider_message(raw: bytes) -> str:
    """The provider's own words from an error body (OpenAI / Anthropic shapes, else the text)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        return _truncate(text) if text.strip() else "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            kind = err.get("type") or err.get("code")
            return _truncate(f"{kind}: {err['message']}" if isinstance(kind, str) and kind else err["message"])
        if isinstance(err, str):
            return _truncate(err)
        for key in ("message", "detail"):
            if isinstance(body.get(key), str):
                return _truncate(body[key])
    return _truncate(text)
