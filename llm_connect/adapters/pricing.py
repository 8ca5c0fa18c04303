"""Prices of hosted models, used to fill :attr:`LLMResponse.cost_usd`.

Prices are USD per million tokens, ``(input, output)``. The default table is a
handful of common OpenAI and Anthropic models **as examples**: providers change
prices, so check them and override with :func:`register_price` (process-wide)
or an adapter's ``prices=`` (one adapter). A model is looked up by its exact
name, else by the longest table entry its name starts with
(``"gpt-4o-mini-2024-07-18"`` uses ``"gpt-4o-mini"``). A model with no price
costs 0.0 and :func:`price_for` returns ``None``, so callers can tell
"free" from "unknown".

Prompt-cache rates: input tokens a provider read from its prompt cache cost
``cached_input_per_million`` (default: the input price times the provider's
documented factor, :data:`CACHED_INPUT_FACTOR` for OpenAI-compatible
endpoints, :data:`ANTHROPIC_CACHE_READ_FACTOR` for Anthropic), and tokens
written to Anthropic's cache cost ``cache_write_per_million`` (default: the
input price times :data:`ANTHROPIC_CACHE_WRITE_FACTOR`, the 5-minute cache).
The table gives the published cached rate of the models where it differs from
the factor (``gpt-4.1``: a quarter of the input price).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ValidationError

__all__ = [
    "ANTHROPIC_CACHE_READ_FACTOR",
    "ANTHROPIC_CACHE_WRITE_FACTOR",
    "BATCH_DISCOUNT",
    "CACHED_INPUT_FACTOR",
    "DEFAULT_PRICES",
    "Price",
    "cost_usd",
    "price_for",
    "register_price",
    "registered_prices",
]

#: The share of the list price a request sent through a provider's Batch API costs: OpenAI's Batch API and
#: Anthropic's Message Batches both bill batched requests at 50% of the list price.
BATCH_DISCOUNT = 0.5
#: OpenAI's price of a cached input token as a share of the input price, for a model whose table entry
#: gives no cached rate (``gpt-4o``, ``gpt-4o-mini``, ``o3-mini``: half the input price).
CACHED_INPUT_FACTOR = 0.5
#: Anthropic's price of a cache read (``cache_read_input_tokens``) as a share of the input price.
ANTHROPIC_CACHE_READ_FACTOR = 0.1
#: Anthropic's price of a cache write (``cache_creation_input_tokens``, the 5-minute cache) as a share of the
#: input price.
ANTHROPIC_CACHE_WRITE_FACTOR = 1.25


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens, and per million cached input tokens.

    Parameters
    ----------
    input_per_million : float
        Input tokens.
    output_per_million : float, default 0.0
        Output tokens.
    cached_input_per_million : float, optional
        A prompt-cache read; ``None`` = the input price times the provider's factor (see :meth:`cost`).
    cache_write_per_million : float, optional
        A prompt-cache write (Anthropic); ``None`` = the input price times
        :data:`ANTHROPIC_CACHE_WRITE_FACTOR`.
    """

    input_per_million: float
    output_per_million: float = 0.0
    cached_input_per_million: float | None = None
    cache_write_per_million: float | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million", "cached_input_per_million", "cache_write_per_million"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValidationError(f"Price.{name} must be a number >= 0, got {value!r}")

    def cost(
        self,
        tokens_in: int,
        tokens_out: int,
        *,
        batch: bool = False,
        tokens_cached: int = 0,
        tokens_cache_written: int = 0,
        cached_factor: float = CACHED_INPUT_FACTOR,
    ) -> float:
        """USD for the tokens.

        Parameters
        ----------
        tokens_in, tokens_out
            All prompt tokens (cached ones included) and the generated tokens.
        batch
            A Batch API request: everything at :data:`BATCH_DISCOUNT` of the price.
        tokens_cached
            Prompt tokens read from the provider's prompt cache, priced at the cached rate.
        tokens_cache_written
            Prompt tokens written to the prompt cache (Anthropic), priced at the cache-write rate.
        cached_factor
            The cached rate as a share of the input price when this price gives none
            (:data:`CACHED_INPUT_FACTOR` for OpenAI, :data:`ANTHROPIC_CACHE_READ_FACTOR` for Anthropic).

        Returns
        -------
        float
            USD.

        Raises
        ------
        ValidationError
            When the cached and written tokens are more than ``tokens_in``.
        """
        if tokens_cached < 0 or tokens_cache_written < 0 or tokens_cached + tokens_cache_written > tokens_in:
            raise ValidationError(
                f"Price.cost: cached ({tokens_cached}) and cache-written ({tokens_cache_written}) tokens must be "
                f">= 0 and together <= tokens_in ({tokens_in})"
            )
        cached_rate = (self.input_per_million * cached_factor if self.cached_input_per_million is None
                       else self.cached_input_per_million)
        write_rate = (self.input_per_million * ANTHROPIC_CACHE_WRITE_FACTOR if self.cache_write_per_million is None
                      else self.cache_write_per_million)
        plain = tokens_in - tokens_cached - tokens_cache_written
        full = (plain * self.input_per_million + tokens_cached * cached_rate + tokens_cache_written * write_rate
                + tokens_out * self.output_per_million) / 1_000_000
        return full * BATCH_DISCOUNT if batch else full


# Examples, as published by the providers at the time of writing; may be outdated.
DEFAULT_PRICES: Mapping[str, Price] = {
    # OpenAI chat
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "o3-mini": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # OpenAI embeddings (input only)
    "text-embedding-3-small": Price(0.02),
    "text-embedding-3-large": Price(0.13),
    "text-embedding-ada-002": Price(0.10),
    # Anthropic
    "claude-3-haiku": Price(0.25, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-3-opus": Price(15.00, 75.00),
    "claude-opus-4": Price(15.00, 75.00),
}

_lock = threading.Lock()
_registered: dict[str, Price] = {}
_version = 0


def table_version() -> int:
    """A counter bumped by every :func:`register_price`, so adapters may cache their lookup."""
    return _version


def register_price(
    model: str,
    input_per_million: float,
    output_per_million: float = 0.0,
    *,
    cached_input_per_million: float | None = None,
    cache_write_per_million: float | None = None,
) -> None:
    """Set (or replace) the price of ``model`` for this process; it wins over the default table.

    ``cached_input_per_million`` / ``cache_write_per_million``: the prompt-cache read and write
    rates (``None``: the provider's documented share of the input price, see :class:`Price`).

    Parameters
    ----------
    model : str
        The model name.
    input_per_million : float
        USD per million input tokens.
    output_per_million : float, default 0.0
        USD per million output tokens.
    cached_input_per_million : float, optional
        The prompt-cache read rate.
    cache_write_per_million : float, optional
        The prompt-cache write rate.
    """
    if not isinstance(model, str) or not model.strip():
        raise ValidationError("register_price: model must be a non-empty string")
    global _version
    price = Price(input_per_million, output_per_million, cached_input_per_million, cache_write_per_million)
    with _lock:
        _registered[model] = price
        _version += 1


def registered_prices() -> dict[str, Price]:
    """The effective process-wide table: defaults overlaid with :func:`register_price` entries.

    Returns
    -------
    dict of str to Price
        Model name to price.
    """
    with _lock:
        return {**DEFAULT_PRICES, **_registered}


def _lookup(table: Mapping[str, Price], model: str) -> Price | None:
    if model in table:
        return table[model]
    best = max((name for name in table if model.startswith(name)), key=len, default=None)
    return None if best is None else table[best]


def _as_price(value: Price | tuple[float, float] | tuple[float] | float) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, bool):
        raise ValidationError(f"a price must be a Price, a number or (input, output) per million tokens, got {value!r}")
    if isinstance(value, (int, float)):
        return Price(float(value))
    return Price(*value)


def price_for(model: str, prices: Mapping[str, Price | tuple[float, float]] | None = None) -> Price | None:
    """The price of ``model``: ``prices`` first, then registered, then the defaults; ``None`` if unknown.

    Parameters
    ----------
    model : str
        The model name.
    prices : mapping, optional
        Prices that win over the registered ones.

    Returns
    -------
    Price or None
        The price.

    Examples
    --------
    >>> price_for("my-model", {"my-model": Price(0.5, 1.5)}).output_per_million
    1.5
    """
    if prices:
        found = _lookup({k: _as_price(v) for k, v in prices.items()}, model)
        if found is not None:
            return found
    with _lock:
        found = _lookup(_registered, model)
    return found if found is not None else _lookup(DEFAULT_PRICES, model)


def cost_usd(
    model: str,
    tokens_in: int,
    tokens_out: int,
    prices: Mapping[str, Price | tuple[float, float]] | None = None,
    *,
    batch: bool = False,
    tokens_cached: int = 0,
    tokens_cache_written: int = 0,
    cached_factor: float = CACHED_INPUT_FACTOR,
) -> float:
    """What a call cost, in USD; 0.0 for a model with no known price. ``batch=True``: sent through a
    provider's Batch API, at :data:`BATCH_DISCOUNT` of the list price; ``tokens_cached`` /
    ``tokens_cache_written``: prompt tokens read from / written to the prompt cache (see :meth:`Price.cost`).

    Parameters
    ----------
    model : str
        The model name.
    tokens_in : int
        Prompt tokens.
    tokens_out : int
        Completion tokens.
    prices : mapping, optional
        Prices that win over the registered ones.
    batch : bool, default False
        Sent through a provider's Batch API.
    tokens_cached : int, default 0
        Prompt tokens read from the prompt cache.
    tokens_cache_written : int, default 0
        Prompt tokens written to it.
    cached_factor : float, default 0.5
        The share of the input price a cached token costs when the price gives no cached rate.

    Returns
    -------
    float
        USD.
    """
    price = price_for(model, prices)
    return 0.0 if price is None else price.cost(tokens_in, tokens_out, batch=batch, tokens_cached=tokens_cached,
                                                tokens_cache_written=tokens_cache_written,
                                                cached_factor=cached_factor)
