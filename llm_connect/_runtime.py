"""One background event loop that all async work of the package runs on.

The sync API (``adapter.complete``, ``judge_many``...) submits coroutines to
this loop and waits for them, so it works the same in a plain script and
inside a running Jupyter event loop. The async API (``acomplete``,
``ajudge_many``...) awaits the same coroutines from the caller's loop via
:func:`on_background`. HTTP sessions are bound to this loop only.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["acall_complete", "acall_embed", "background_loop", "on_background", "run_sync"]

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
# Sync adapters/judges run in threads; the default executor (min(32, cpu+4)
# workers) would cap a batch's concurrency on small machines.
_EXECUTOR_WORKERS = 256


def background_loop() -> asyncio.AbstractEventLoop:
    """The package's event loop, started on first use in a daemon thread."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            loop.set_default_executor(
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=_EXECUTOR_WORKERS, thread_name_prefix="llm_connect-worker"
                )
            )
            ready = threading.Event()

            def _run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=_run, name="llm_connect-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def _in_background_loop() -> bool:
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and wait for it from a sync caller.

    A ``KeyboardInterrupt`` while waiting cancels the coroutine and re-raises.
    """
    if _in_background_loop():
        coro.close()
        raise RuntimeError("llm_connect: a sync call was made from inside its own event loop; await the a* twin")
    loop = background_loop()
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        raise


async def on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop from whatever loop the caller runs."""
    if _in_background_loop():
        return await coro
    loop = background_loop()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking callable in the background loop's wide executor, in a copy of the caller's context.

    The context matters: it carries the run budget a row's calls are charged
    to (:func:`llm_connect.core.budget_scope`), which a sync judge's adapter
    calls in the worker thread must see (``run_in_executor`` alone drops it).
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await loop.run_in_executor(None, call)


async def acall_complete(adapter: Any, prompt: str, run_config: Any) -> Any:
    """Await ``adapter.acomplete`` when it exists, else run ``complete`` in a thread."""
    acomplete = getattr(adapter, "acomplete", None)
    if acomplete is not None:
        return await acomplete(prompt, run_config)
    return await to_thread(adapter.complete, prompt, run_config)


async def acall_embed(embedder: Any, texts: Sequence[str]) -> Any:
    aembed = getattr(embedder, "aembed", None)
    if aembed is not None:
        return await aembed(texts)
    return await to_thread(embedder.embed, texts)


async def maybe_await(value: Awaitable[T] | T) -> T:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value  # type: ignore[return-value]


def _shutdown() -> None:
    """Stop the background loop, wait for its thread, and close it (no "unclosed loop" at exit)."""
    loop, thread = _loop, _thread
    if loop is None or loop.is_closed():
        return
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(timeout=5.0)
    if not loop.is_running():
        executor = getattr(loop, "_default_executor", None)
        loop.close()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


atexit.register(_shutdown)
