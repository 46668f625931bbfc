"""A connection's own commands of pulsar.proto.

The handshake, authentication, keep-alive, the transaction coordinator requests a broker
without a coordinator refuses, and the generic Success and Error.
"""

from __future__ import annotations

from protocol.commands.records import FeatureFlags, Record, Schema
from protocol.errors import ServerError


class Connect(Record, frozen=True, kw_only=True):
    """``CommandConnect`` of pulsar.proto."""

    client_version: str
    auth_method: int | None = None
    auth_data: bytes | None = None
    protocol_version: int = 0
    auth_method_name: str | None = None
    proxy_to_broker_url: str | None = None
    original_principal: str | None = None
    original_auth_data: str | None = None
    original_auth_method: str | None = None
    feature_flags: FeatureFlags | None = None


class Connected(Record, frozen=True, kw_only=True):
    """``CommandConnected`` of pulsar.proto."""

    server_version: str
    protocol_version: int = 0
    max_message_size: int | None = None
    feature_flags: FeatureFlags | None = None


class Ping(Record, frozen=True, kw_only=True):
    """``CommandPing`` of pulsar.proto."""

    pass


class Pong(Record, frozen=True, kw_only=True):
    """``CommandPong`` of pulsar.proto."""

    pass


class AuthData(Record, frozen=True, kw_only=True):
    """A credential (``auth_method_name`` + bytes), or the broker's refresh request."""

    auth_method_name: str | None = None
    auth_data: bytes | None = None


class AuthChallenge(Record, frozen=True, kw_only=True):
    """The broker asks for (fresh) credentials; the client answers AUTH_RESPONSE."""

    server_version: str | None = None
    challenge: AuthData | None = None
    protocol_version: int = 0


class AuthResponse(Record, frozen=True, kw_only=True):
    """``CommandAuthResponse`` of pulsar.proto."""

    client_version: str | None = None
    response: AuthData | None = None
    protocol_version: int = 0


class TcClientConnectRequest(Record, frozen=True, kw_only=True):
    """``CommandTcClientConnectRequest`` of pulsar.proto."""

    request_id: int
    tc_id: int = 0


class NewTxn(Record, frozen=True, kw_only=True):
    """``CommandNewTxn`` of pulsar.proto."""

    request_id: int
    txn_ttl_seconds: int = 0
    tc_id: int = 0


class AddPartitionToTxn(Record, frozen=True, kw_only=True):
    """``CommandAddPartitionToTxn`` of pulsar.proto (the partitions are not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


class AddSubscriptionToTxn(Record, frozen=True, kw_only=True):
    """``CommandAddSubscriptionToTxn`` of pulsar.proto (the subscriptions are not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


class EndTxn(Record, frozen=True, kw_only=True):
    """``CommandEndTxn`` of pulsar.proto (the action is not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


TxnRequest = TcClientConnectRequest | NewTxn | AddPartitionToTxn | AddSubscriptionToTxn | EndTxn
"""The transaction coordinator requests a broker without a coordinator refuses."""


class Success(Record, frozen=True, kw_only=True):
    """``CommandSuccess`` of pulsar.proto."""

    request_id: int
    schema: Schema | None = None


class Error(Record, frozen=True, kw_only=True):
    """``CommandError`` of pulsar.proto."""

    request_id: int
    error: ServerError
    message: str
