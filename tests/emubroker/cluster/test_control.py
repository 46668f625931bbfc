"""The control socket: one JSON request, one JSON reply, errors answered, not raised."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from emubroker.cluster.control import (
    ControlError,
    KillBroker,
    Reply,
    Request,
    StartBroker,
    call,
    serve_control,
)

pytestmark = pytest.mark.anyio


async def handler(request: Request) -> Reply:
    match request:
        case KillBroker(broker, signal):
            return Reply(ok=True, message=f"{signal} to {broker}")
        case StartBroker("boom"):
            raise RuntimeError("it broke")
    return Reply(ok=False, message=f"unexpected {request}")


async def test_a_request_gets_its_reply_and_a_failing_one_an_error_reply(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(serve_control, path, handler)
        assert await call(path, KillBroker("1", "KILL")) == Reply(ok=True, message="KILL to 1")
        failed = await call(path, StartBroker("boom"))
        assert not failed.ok
        assert failed.message == "RuntimeError: it broke"
        async with await anyio.connect_unix(path) as stream:
            await stream.send(b'{"type": "explode"}\n')
            raw = await BufferedByteReceiveStream(stream).receive_until(b"\n", 10_000)
        assert b"bad request" in raw
        tg.cancel_scope.cancel()
    assert not path.exists()  # removed when the supervisor stops


async def test_nobody_listening_is_a_control_error(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="no cluster supervisor answers"):
        await call(tmp_path / "control.sock", KillBroker("0"))
