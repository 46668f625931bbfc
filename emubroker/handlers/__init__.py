"""Command -> service call, per connection; domain errors -> the reply form of spec §4.2, once.

One :class:`ConnectionHandler` (``connection``) serves one session and dispatches each frame to
a command group: ``producers`` (PRODUCER, SEND, CLOSE_PRODUCER, §6), ``consumers`` (SUBSCRIBE,
FLOW, ACK, REDELIVER, SEEK, GET_LAST_MESSAGE_ID, UNSUBSCRIBE, CLOSE_CONSUMER, CONSUMER_STATS, §7)
and ``discovery`` (PARTITIONED_METADATA, LOOKUP, GET_TOPICS_OF_NAMESPACE, schemas, §5, §11).

Errors: topics raise ``protocol.errors.BrokerError`` subclasses; the request that met one answers
in the form the client routes back to that request (PARTITIONED_METADATA and LOOKUP with
``response=Failed``, PRODUCER and SUBSCRIBE with ERROR, ACK with ACK_RESPONSE, SEND with
SEND_ERROR ...). Unexpected exceptions are logged and answered as ``UnknownError`` in the same
form; they never end the connection.
"""

from __future__ import annotations

from emubroker.handlers.common import SERVER_VERSION, BrokerServices, SessionPort
from emubroker.handlers.connection import ConnectionHandler
from emubroker.handlers.producers import SCHEMA_VERSION_ZERO

__all__ = [
    "SCHEMA_VERSION_ZERO",
    "SERVER_VERSION",
    "BrokerServices",
    "ConnectionHandler",
    "SessionPort",
]
