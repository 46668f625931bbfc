"""An in-memory broker deletes the ledgers every subscription has consumed, as Pulsar does."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pulsar
import pytest

from emubroker.testing import run_broker_in_thread
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000


def test_consumed_ledgers_are_deleted_so_memory_stays_bounded() -> None:
    with run_broker_in_thread(managedLedgerMaxEntriesPerLedger=10) as broker:
        client = make_client(broker.service_url)
        try:
            topic = f"persistent://public/default/trim-{uuid.uuid4().hex[:10]}"
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, batching_enabled=False)
            sent = [producer.send(b"%d" % i) for i in range(35)]
            for _ in sent:
                consumer.acknowledge(consumer.receive(RECEIVE_MS))
            consumer.close()  # sends the grouped acks first
            url = f"{broker.admin_url}/admin/v2/{topic.replace('://', '/')}/internalStats"
            with urllib.request.urlopen(url, timeout=5) as response:
                stats = json.loads(response.read())
            # Entries 0-29 filled three ledgers, all consumed: only the current one is left.
            assert [ledger["ledgerId"] for ledger in stats["ledgers"]] == [sent[30].ledger_id()]
            assert (stats["entriesAddedCounter"], stats["numberOfEntries"]) == (35, 5)
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            assert reader.read_next(RECEIVE_MS).data() == b"30"
        finally:
            client.close()
