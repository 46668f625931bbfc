from __future__ import annotations

import pickle

import pytest

from protocol import errors
from protocol.errors import (
    BrokerError,
    ClientClosedError,
    ClientError,
    ConnectionBrokenError,
    ConsumerBusyError,
    ConsumerClosedError,
    LocalProtocolError,
    OperationTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    ProtocolError,
    PulsarError,
    RemoteProtocolError,
    ServerError,
    ServiceNotReadyError,
    TopicNotFoundError,
    UnknownError,
)

# wire-protocol.md §4.3, transcribed by hand: (wire value, name, client retries?).
SPEC_TABLE = [
    (0, "UnknownError", True),
    (1, "MetadataError", True),
    (2, "PersistenceError", True),
    (3, "AuthenticationError", False),
    (4, "AuthorizationError", False),
    (5, "ConsumerBusy", False),
    (6, "ServiceNotReady", True),
    (7, "ProducerBlockedQuotaExceededError", False),
    (8, "ProducerBlockedQuotaExceededException", False),
    (9, "ChecksumError", False),
    (10, "UnsupportedVersionError", True),
    (11, "TopicNotFound", False),
    (12, "SubscriptionNotFound", True),
    (13, "ConsumerNotFound", True),
    (14, "TooManyRequests", False),
    (15, "TopicTerminatedError", False),
    (16, "ProducerBusy", False),
    (17, "InvalidTopicName", True),
    (18, "IncompatibleSchema", False),
    (19, "ConsumerAssignError", False),
    (20, "TransactionCoordinatorNotFound", False),
    (21, "InvalidTxnStatus", False),
    (22, "NotAllowedError", False),
    (23, "TransactionConflict", False),
    (24, "TransactionNotFound", False),
    (25, "ProducerFenced", False),
]


def test_server_error_values_match_the_spec() -> None:
    assert [(e.value, e.name) for e in ServerError] == [(v, n) for v, n, _ in SPEC_TABLE]


@pytest.mark.parametrize(("value", "name", "retriable"), SPEC_TABLE)
def test_for_code_maps_each_code_to_its_class(value: int, name: str, retriable: bool) -> None:
    exc = BrokerError.for_code(value, "broker said no")
    assert type(exc).code is ServerError[name]
    assert type(exc).retriable is retriable
    assert exc.message == "broker said no"
    assert str(exc) == "broker said no"
    # The class is public under the name the module documents.
    expected = name if name.endswith(("Error", "Exception")) else f"{name}Error"
    assert type(exc).__name__ == expected
    assert getattr(errors, expected) is type(exc)
    assert expected in errors.__all__


def test_each_code_has_its_own_class() -> None:
    classes = {type(BrokerError.for_code(code)) for code in ServerError}
    assert len(classes) == len(ServerError)


def test_for_code_accepts_the_enum() -> None:
    assert isinstance(BrokerError.for_code(ServerError.TopicNotFound, "x"), TopicNotFoundError)


@pytest.mark.parametrize("code", [26, 99, -1])
def test_unknown_code_maps_to_unknown_error_and_keeps_the_number(code: int) -> None:
    exc = BrokerError.for_code(code, "from the future")
    assert type(exc) is UnknownError
    assert exc.code is ServerError.UnknownError
    assert exc.message == f"from the future (unknown server error code {code})"


def test_broker_errors_are_caught_by_class() -> None:
    with pytest.raises(ConsumerBusyError, match="Exclusive consumer is already connected"):
        raise BrokerError.for_code(5, "Exclusive consumer is already connected")


def test_retry_policy_reads_the_class_attribute() -> None:
    assert ServiceNotReadyError("loading").retriable
    assert not ProducerFencedError("fenced").retriable


def test_broker_error_survives_pickling() -> None:
    exc = pickle.loads(pickle.dumps(TopicNotFoundError("no such topic")))
    assert type(exc) is TopicNotFoundError
    assert exc.message == "no such topic"


@pytest.mark.parametrize("cls", [LocalProtocolError, RemoteProtocolError])
def test_protocol_errors_carry_a_hint(cls: type[ProtocolError]) -> None:
    with pytest.raises(cls, match="bad frame") as info:
        raise cls("bad frame", error_hint=ServerError.ChecksumError)
    assert info.value.error_hint is ServerError.ChecksumError
    assert isinstance(info.value, ProtocolError)
    assert isinstance(info.value, PulsarError)


def test_protocol_error_hint_defaults_to_none() -> None:
    assert RemoteProtocolError("garbage").error_hint is None


def test_protocol_error_base_is_abstract() -> None:
    with pytest.raises(TypeError, match="LocalProtocolError or RemoteProtocolError"):
        ProtocolError("whose fault?")


def test_local_and_remote_protocol_errors_are_distinct() -> None:
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)


def test_closed_and_broken_are_different_exceptions() -> None:
    assert not issubclass(ConnectionBrokenError, ClientClosedError)
    assert not issubclass(ClientClosedError, ConnectionBrokenError)
    assert issubclass(ProducerClosedError, ClientClosedError)
    assert issubclass(ConsumerClosedError, ClientClosedError)


@pytest.mark.parametrize(
    "name",
    [
        "ClientClosedError",
        "ConnectionBrokenError",
        "OperationTimeoutError",
        "ProducerClosedError",
        "ConsumerClosedError",
        "MessageTooBigError",
        "ChecksumMismatchError",
    ],
)
def test_client_errors_are_pulsar_errors_not_broker_errors(name: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, ClientError)
    assert issubclass(cls, PulsarError)
    assert not issubclass(cls, BrokerError)


def test_operation_timeout_is_not_an_os_error() -> None:
    # except OSError around transport code must not swallow our timeouts.
    assert not issubclass(OperationTimeoutError, OSError)
