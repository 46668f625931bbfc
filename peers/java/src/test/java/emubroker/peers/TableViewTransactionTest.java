package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.TableView;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

class TableViewTransactionTest {

    @Test
    void tableViewKeepsTheLatestValuePerKeyAndFollowsUpdates() throws Exception {
        String topic = Judge.topic("tableview");
        try (PulsarClient client = Judge.client();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
            p.newMessage().key("k1").value("a").send();
            p.newMessage().key("k2").value("b").send();
            p.newMessage().key("k1").value("c").send();
            try (TableView<String> tv = client.newTableView(Schema.STRING).topic(topic).create()) {
                assertEquals(Map.of("k1", "c", "k2", "b"), Map.ofEntries(tv.entrySet().toArray(new Map.Entry[0])),
                        "create() returns once the view has read the topic to its end");
                Map<String, String> seen = new ConcurrentHashMap<>();
                tv.forEachAndListen(seen::put);
                p.newMessage().key("k2").value("d").send();
                p.newMessage().key("k3").value("e").send();
                Judge.await("the view follows new messages", 10,
                        () -> "d".equals(tv.get("k2")) && "e".equals(tv.get("k3")));
                Judge.await("the listener sees them", 10, () -> "e".equals(seen.get("k3")));
                assertEquals(3, tv.size());
            }
        }
    }

    /**
     * Pulsar without a transaction coordinator (transactionCoordinatorEnabled=false, the default):
     * a client built with enableTransaction(true) starts its coordinator client at build time,
     * which fails, so build() throws instead of returning a client that cannot commit.
     */
    // A cluster's metadata, as `pulsar initialize-cluster-metadata` writes it, holds 16
    // transaction coordinators even with transactions disabled: each answers TC_CLIENT_CONNECT
    // "Transactions are not enabled.", and this client keeps retrying them past its operation
    // timeout. Only a standalone has none (its coordinator topic has no partitions).
    @EnabledIfSystemProperty(named = "emubroker.mode", matches = "standalone",
            disabledReason = "a cluster has coordinators that refuse; the client retries them")
    @Test
    void aTransactionalClientFailsToStartWithoutACoordinator() {
        long start = System.nanoTime();
        PulsarClientException e = assertThrows(PulsarClientException.class, () -> {
            try (PulsarClient client = Judge.builder().enableTransaction(true)
                    .operationTimeout(10, TimeUnit.SECONDS).build()) {
                fail("a transactional client started against a broker without transactions");
            }
        });
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        System.out.println("enableTransaction(true) without a coordinator: " + e + " after " + seconds + " s");
        assertTrue(seconds < 30, "the failure comes within the operation timeout: " + seconds + " s");
    }

    /** What Pulsar 4.0.7 standalone answers (observed): the coordinator client's own error. */
    @EnabledIfSystemProperty(named = "emubroker.mode", matches = "standalone",
            disabledReason = "a cluster has coordinators that refuse; the client retries them")
    @Test
    void theFailureSaysTheCoordinatorIsNotEnabled() {
        PulsarClientException e = assertThrows(PulsarClientException.class, () -> {
            try (PulsarClient client = Judge.builder().enableTransaction(true)
                    .operationTimeout(10, TimeUnit.SECONDS).build()) {
                fail("a transactional client started against a broker without transactions");
            }
        });
        assertTrue(e.getMessage().contains("The broker doesn't enable the transaction coordinator"), e.toString());
    }
}
