"""Real adapters: hosted models over HTTP and local models in-process.

==============================  ===========================================  ==================
adapter                         talks to                                     needs
==============================  ===========================================  ==================
``OpenAICompatibleAdapter``     any OpenAI-compatible ``/chat/completions``  (core)
``OpenAICompatibleEmbedder``    any OpenAI-compatible ``/embeddings``        (core)
``AnthropicAdapter``            Anthropic's Messages API                     (core)
``LlamaCppAdapter``             a GGUF file in-process (SmolLM2 by default)  ``[llama]`` extra
``TransformersAdapter``         the same GGUF, converted once, onnxruntime   ``[local]`` extra
``SentenceTransformerEmbedder`` sentence-transformers (MiniLM by default)    ``[local]`` extra
==============================  ===========================================  ==================

The HTTP adapters share one base class (:class:`HTTPAdapter`: session on the
package's event loop, retries, rate limits, error translation) and the chat
ones one more (:class:`ChatHTTPAdapter`: response cache, budget, cost).
:func:`local_adapter` gives the embedded LLM on the runtime installed (llama.cpp
when it is, the converted model on onnxruntime otherwise).
Importing this package imports neither aiohttp nor llama_cpp, torch or
sentence_transformers: each is imported on first use.
"""

from . import pricing
from ._anthropic import AnthropicAdapter
from ._batches import BatchOptions, BatchRequestError, resubmit_expired
from ._cache import ResponseCache
from ._http import ChatHTTPAdapter, HTTPAdapter, is_loopback_url, parse_retry_after
from ._local import LlamaCppAdapter, SentenceTransformerEmbedder, default_embedding_model_path, default_gguf_path
from ._openai import OpenAICompatibleAdapter, OpenAICompatibleEmbedder
from ._transformers import TransformersAdapter, local_adapter
from .pricing import Price, register_price

__all__ = [
    "AnthropicAdapter",
    "BatchOptions",
    "BatchRequestError",
    "ChatHTTPAdapter",
    "HTTPAdapter",
    "LlamaCppAdapter",
    "OpenAICompatibleAdapter",
    "OpenAICompatibleEmbedder",
    "Price",
    "ResponseCache",
    "SentenceTransformerEmbedder",
    "TransformersAdapter",
    "default_embedding_model_path",
    "default_gguf_path",
    "is_loopback_url",
    "local_adapter",
    "parse_retry_after",
    "pricing",
    "register_price",
    "resubmit_expired",
]
