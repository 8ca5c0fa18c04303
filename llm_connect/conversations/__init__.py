"""Conversations and agent runs as items to judge: OpenAI chat messages in, one item per assistant reply out.

An item may carry ``messages``, the conversation before the judged reply, as OpenAI chat messages:
``role`` (``system``, ``user``, ``assistant``, ``tool``; ``developer`` is taken as OpenAI's newer
name of ``system``), ``content`` (a string, or content parts of type ``text``), ``tool_calls``
(``[{"id", "type": "function", "function": {"name", "arguments"}}]``, ``arguments`` a JSON string
or an object) and ``tool_call_id`` on tool messages. Its ``candidate`` and ``baseline`` are each a
string (a reply) or a list of messages (a *trajectory*: assistant messages with tool calls, the tool
results, the final answer); ``context`` is a list of strings (the documents a grounded answer may use).

=================================  ==========================================================
what                               functions
=================================  ==========================================================
a conversation -> one item per     :func:`per_turn`
assistant reply
a file -> items                    :func:`read_conversations` (OpenAI chat JSON Lines, OTLP JSON
                                   GenAI spans)
one message / a list checked       :func:`normalize_message`, :func:`normalize_messages`
a reply as an ``LLMResponse``      :func:`as_response`, :func:`final_answer`, :func:`message_text`
=================================  ==========================================================

**What one turn is.** A turn is one assistant reply: a maximal run of consecutive ``assistant`` and
``tool`` messages (so an agent's tool-call message, the tool results and its final answer are one
turn, not three), which ends at the next ``user`` or ``system`` message. Its candidate is the
assistant message's text when the run is a single assistant message without tool calls, else the
run itself as a list of messages (a trajectory). ``turn`` counts the replies of a conversation
from 0. A ``tool`` message that does not follow an assistant message is an error.

Every message is validated strictly, and an error names where it is (``line 3: message 2: ...``,
``span 00f067aa0ba902b7: ...``): an unknown role, a tool message without ``tool_call_id``, a
content part that is not text, a tool call without a function name... Nothing is half-read: a
malformed line or span stops the reading with an error. Tool-call arguments that are not valid
JSON are kept as they are (they are the agent's mistake to judge: a trajectory judge marks such a
row *unscored* with the reason).

The package's modules are private, one idea each, and every name above is imported from here: message
checks and replies (``_messages.py``), turns (``_turns.py``: :func:`per_turn`), reading OpenAI chat JSON
Lines (``_openai.py``) and OTLP JSON GenAI spans (``_otlp.py``), and :func:`read_conversations`, which tells
the two apart (``_read.py``).
"""

from ._messages import (
    ROLES,
    as_response,
    documents,
    final_answer,
    is_trajectory,
    message_text,
    normalize_message,
    normalize_messages,
)
from ._read import read_conversations
from ._turns import CONVERSATION_KEY_PREFIX, TURN_COLUMNS, conversation_key, per_turn

__all__ = [
    "CONVERSATION_KEY_PREFIX",
    "ROLES",
    "TURN_COLUMNS",
    "as_response",
    "conversation_key",
    "documents",
    "final_answer",
    "is_trajectory",
    "message_text",
    "normalize_message",
    "normalize_messages",
    "per_turn",
    "read_conversations",
]
