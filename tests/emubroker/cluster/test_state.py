"""The run directory: state file, lock, broker names, default location."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from emubroker.cluster.state import (
    BrokerState,
    ChildStatus,
    ClusterState,
    RunDirLockedError,
    StubState,
    UnknownBrokerError,
    default_run_dir,
    find_broker,
    hold_run_dir,
    read_state,
    run_dir_in_use,
    write_state,
)


def state() -> ClusterState:
    return ClusterState(
        supervisor_pid=10,
        stub=StubState(pid=11, url="stub://127.0.0.1:3181"),
        brokers=[
            BrokerState(index=i, port=6650 + i, admin_port=8080 + i, pid=20 + i) for i in range(3)
        ],
    )


def test_the_state_file_round_trips_and_is_replaced_whole(tmp_path: Path) -> None:
    original = state()
    write_state(tmp_path, original)
    original.brokers[1].status = ChildStatus.DEAD
    write_state(tmp_path, original)
    assert read_state(tmp_path) == original
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no partial file left


def test_an_unreadable_state_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not a cluster state file"):
        read_state(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_state(tmp_path / "nowhere")


def test_the_summary_spells_out_urls_and_broker_ids() -> None:
    summary = state().summary()
    assert summary["service_url"] == "pulsar://127.0.0.1:6650,127.0.0.1:6651,127.0.0.1:6652"
    broker = summary["brokers"][1]  # type: ignore[index]
    assert broker["broker_id"] == "127.0.0.1:8081"
    assert broker["service_url"] == "pulsar://127.0.0.1:6651"
    assert broker["admin_url"] == "http://127.0.0.1:8081"


@pytest.mark.parametrize(
    "name",
    ["1", "127.0.0.1:6651", "127.0.0.1:8081", "pulsar://127.0.0.1:6651", "http://127.0.0.1:8081/"],
)
def test_a_broker_is_named_by_index_address_or_url(name: str) -> None:
    assert find_broker(state(), name).index == 1


@pytest.mark.parametrize("name", ["3", "127.0.0.1:9999", "leader", "-1"])
def test_an_unknown_broker_lists_the_names_that_work(name: str) -> None:
    with pytest.raises(UnknownBrokerError, match=r"brokers: 0 \(127.0.0.1:6650, 127.0.0.1:8080\)"):
        find_broker(state(), name)


def test_the_run_directory_is_held_by_one_supervisor(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert not run_dir_in_use(run_dir)
    with hold_run_dir(run_dir):
        assert run_dir_in_use(run_dir)
        with pytest.raises(RunDirLockedError, match="already running"), hold_run_dir(run_dir):
            pass
    assert not run_dir_in_use(run_dir)


def test_default_run_directories() -> None:
    assert default_run_dir("/data/cluster") == Path("/data/cluster/run")
    assert default_run_dir() == Path(tempfile.gettempdir()) / f"emubroker-{os.getuid()}/cluster"
