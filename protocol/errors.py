"""The exception tree shared by every layer (STYLE.md §1.10-13).

    PulsarError
    ├── ProtocolError                 someone broke the wire protocol; carries `error_hint`
    │   ├── LocalProtocolError        ... our caller, by misusing the API
    │   └── RemoteProtocolError       ... the peer, by what it sent
    ├── BrokerError                   a broker answered with a ServerError; one subclass per code
    └── ClientError                   our client API failed for a reason of its own
        ├── ClientClosedError         "you closed it" (Producer/ConsumerClosedError below it)
        ├── ConnectionBrokenError     "it broke"
        └── OperationTimeoutError, MessageTooBigError, ChecksumMismatchError

Retry policy reads `BrokerError.retriable`, never the message text. Sans-IO: no anyio here.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import ClassVar, Final

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "ChecksumError",
    "ChecksumMismatchError",
    "ClientClosedError",
    "ClientError",
    "ConnectionBrokenError",
    "ConsumerAssignError",
    "ConsumerBusyError",
    "ConsumerClosedError",
    "ConsumerNotFoundError",
    "IncompatibleSchemaError",
    "InvalidTopicNameError",
    "InvalidTxnStatusError",
    "LocalProtocolError",
    "MessageTooBigError",
    "MetadataError",
    "NotAllowedError",
    "OperationTimeoutError",
    "PersistenceError",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusyError",
    "ProducerClosedError",
    "ProducerFencedError",
    "ProtocolError",
    "PulsarError",
    "RemoteProtocolError",
    "ServerError",
    "ServiceNotReadyError",
    "SubscriptionNotFoundError",
    "TooManyRequestsError",
    "TopicNotFoundError",
    "TopicTerminatedError",
    "TransactionConflictError",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFoundError",
    "UnknownError",
    "UnsupportedVersionError",
]


class ServerError(enum.IntEnum):
    """`ServerError` codes of PulsarApi.proto, as carried by ERROR, SEND_ERROR and lookup replies.

    Values are wire values and must never change (wire-protocol.md §4.3).
    """

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class PulsarError(Exception):
    """Base of every exception emubroker's packages raise on purpose."""


class ProtocolError(PulsarError):
    """The wire protocol was violated; abstract, raise a subclass.

    Args:
        message: What went wrong, for humans.
        error_hint: The code to answer the peer with, if the violation deserves an answer.

    Attributes:
        error_hint: As given.
    """

    def __init__(self, message: str, *, error_hint: ServerError | None = None) -> None:
        # Abstract like h11's ProtocolError: callers must say whose fault it was.
        if type(self) is ProtocolError:
            raise TypeError("raise LocalProtocolError or RemoteProtocolError, not ProtocolError")
        super().__init__(message)
        self.error_hint = error_hint


class LocalProtocolError(ProtocolError):
    """Our caller misused the protocol API (e.g. sent a command the state does not allow)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol (malformed frame, unexpected command, bad handshake)."""


class BrokerError(PulsarError):
    """A broker answered a request with a `ServerError`; one subclass per code.

    Build one from a wire code with `BrokerError.for_code`; catch the subclasses.

    Args:
        message: The broker's error message, as sent.

    Attributes:
        code: The `ServerError` this class stands for (class attribute).
        retriable: Whether the client retries the operation on this code (class attribute), per
            the "client retries?" column of wire-protocol.md §4.3.
        message: As given.
    """

    code: ClassVar[ServerError]
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    @staticmethod
    def for_code(code: int, message: str = "") -> BrokerError:
        """Return the exception for a wire error code.

        Args:
            code: A `ServerError` value; any other int (a newer peer) maps to `UnknownError`, with
                the number appended to the message so it is not lost.
            message: The broker's error message.

        Returns:
            An instance of the subclass registered for `code`.
        """
        try:
            server_error = ServerError(code)
        except ValueError:
            return UnknownError(f"{message} (unknown server error code {code})")
        return _BY_CODE[server_error](message)


# One class per code, in code order. Class name = spec name, plus "Error" unless it already ends in
# Error or Exception. Docstrings say when the emulator answers with the code (§4.3 "use it for").


class UnknownError(BrokerError):
    """Code 0: unspecified failure; also stands for codes this version does not know."""

    code = ServerError.UnknownError
    retriable = True


class MetadataError(BrokerError):
    """Code 1: the broker's metadata store failed."""

    code = ServerError.MetadataError
    retriable = True


class PersistenceError(BrokerError):
    """Code 2: storage (the bookie stub) failed."""

    code = ServerError.PersistenceError
    retriable = True


class AuthenticationError(BrokerError):
    """Code 3: the CONNECT's credentials were refused (the broker then closes the connection)."""

    code = ServerError.AuthenticationError


class AuthorizationError(BrokerError):
    """Code 4: the role may not do this (lookup, produce, subscribe... on that topic)."""

    code = ServerError.AuthorizationError


class ConsumerBusyError(BrokerError):
    """Code 5: a second consumer on an Exclusive subscription, or a subscription-type mismatch."""

    code = ServerError.ConsumerBusy


class ServiceNotReadyError(BrokerError):
    """Code 6: transient "try again", e.g. the topic is loading or unloading."""

    code = ServerError.ServiceNotReady
    retriable = True


class ProducerBlockedQuotaExceededError(BrokerError):
    """Code 7: the backlog quota is exceeded and the policy holds producers."""

    code = ServerError.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(BrokerError):
    """Code 8: the backlog quota is exceeded and the policy fails producers."""

    code = ServerError.ProducerBlockedQuotaExceededException


class ChecksumError(BrokerError):
    """Code 9: the broker found a bad CRC32C in a SEND; fails that one message."""

    code = ServerError.ChecksumError


class UnsupportedVersionError(BrokerError):
    """Code 10: the request needs a protocol version the peer does not speak."""

    code = ServerError.UnsupportedVersionError
    retriable = True


class TopicNotFoundError(BrokerError):
    """Code 11: no such topic (auto-create off), tenant or namespace; or no schema to GET."""

    code = ServerError.TopicNotFound


class SubscriptionNotFoundError(BrokerError):
    """Code 12: no such subscription."""

    code = ServerError.SubscriptionNotFound
    retriable = True


class ConsumerNotFoundError(BrokerError):
    """Code 13: no such consumer."""

    code = ServerError.ConsumerNotFound
    retriable = True


class TooManyRequestsError(BrokerError):
    """Code 14: too many lookups; in lookup replies the client also closes the connection."""

    code = ServerError.TooManyRequests


class TopicTerminatedError(BrokerError):
    """Code 15: a PRODUCER on a terminated topic."""

    code = ServerError.TopicTerminatedError


class ProducerBusyError(BrokerError):
    """Code 16: a producer with that name is already connected."""

    code = ServerError.ProducerBusy


class InvalidTopicNameError(BrokerError):
    """Code 17: a malformed topic name (retried: it is not in the client's fatal list)."""

    code = ServerError.InvalidTopicName
    retriable = True


class IncompatibleSchemaError(BrokerError):
    """Code 18: the schema conflicts with the topic's."""

    code = ServerError.IncompatibleSchema


class ConsumerAssignError(BrokerError):
    """Code 19: a Key_Shared hash-range conflict."""

    code = ServerError.ConsumerAssignError


class TransactionCoordinatorNotFoundError(BrokerError):
    """Code 20: no transaction coordinator (transactions are out of scope)."""

    code = ServerError.TransactionCoordinatorNotFound


class InvalidTxnStatusError(BrokerError):
    """Code 21: the transaction is in the wrong state."""

    code = ServerError.InvalidTxnStatus


class NotAllowedError(BrokerError):
    """Code 22: the operation is not allowed, e.g. a durable/non-durable subscription name clash."""

    code = ServerError.NotAllowedError


class TransactionConflictError(BrokerError):
    """Code 23: a transaction conflict."""

    code = ServerError.TransactionConflict


class TransactionNotFoundError(BrokerError):
    """Code 24: no such transaction."""

    code = ServerError.TransactionNotFound


class ProducerFencedError(BrokerError):
    """Code 25: exclusive-access conflict; the producer is fenced for good."""

    code = ServerError.ProducerFenced


# Read-only and built once from the classes above, so there is no registration to forget and no
# mutable module state; tests check that it covers every ServerError exactly once.
_BY_CODE: Final[MappingProxyType[ServerError, type[BrokerError]]] = MappingProxyType(
    {cls.code: cls for cls in BrokerError.__subclasses__()}
)


class ClientError(PulsarError):
    """Our client API failed for a reason other than a broker's error reply."""


class ClientClosedError(ClientError):
    """You closed it: the client, or the producer/consumer, was closed by its owner.

    Contrast `ConnectionBrokenError`: closing is a local decision and is never retried.
    """


class ProducerClosedError(ClientClosedError):
    """The producer was closed before or during the operation."""


class ConsumerClosedError(ClientClosedError):
    """The consumer was closed before or during the operation."""


class ConnectionBrokenError(ClientError):
    """It broke: the connection to the broker failed underneath us (reset, EOF, bad frame).

    The transport's own exception, if any, is chained as `__cause__`.
    """


class OperationTimeoutError(ClientError):
    """The operation did not finish before its deadline (operation or send timeout).

    Deliberately not a subclass of the builtin `TimeoutError`, which is an `OSError`.
    """


class MessageTooBigError(ClientError):
    """The payload exceeds the broker's `max_message_size` (from CONNECTED)."""


class ChecksumMismatchError(ClientError):
    """A received message's CRC32C does not match its bytes; the message is corrupt."""
