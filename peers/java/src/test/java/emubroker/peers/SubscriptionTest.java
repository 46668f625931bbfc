package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class SubscriptionTest {
    static PulsarClient client;

    @BeforeAll
    static void open() throws Exception {
        client = Judge.client();
    }

    @AfterAll
    static void close() throws Exception {
        client.close();
    }

    private ConsumerBuilder<String> consumer(String topic, SubscriptionType type) {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName("judge")
                .subscriptionType(type).subscriptionInitialPosition(SubscriptionInitialPosition.Earliest);
    }

    private Producer<String> producer(String topic, boolean batching) throws Exception {
        return client.newProducer(Schema.STRING).topic(topic).enableBatching(batching)
                .batchingMaxPublishDelay(100, TimeUnit.MILLISECONDS).create();
    }

    private static List<String> drain(Consumer<String> c, int seconds) throws Exception {
        List<String> got = new ArrayList<>();
        Message<String> m;
        while ((m = c.receive(seconds, TimeUnit.SECONDS)) != null) {
            got.add(m.getValue());
            c.acknowledge(m);
        }
        return got;
    }

    @Test
    void exclusiveRefusesASecondConsumer() throws Exception {
        String topic = Judge.topic("sub-exclusive");
        try (Consumer<String> a = consumer(topic, SubscriptionType.Exclusive).subscribe()) {
            assertThrows(PulsarClientException.ConsumerBusyException.class,
                    () -> consumer(topic, SubscriptionType.Exclusive).subscribe());
        }
    }

    @Test
    void sharedSpreadsMessagesOverConsumers() throws Exception {
        String topic = Judge.topic("sub-shared");
        try (Consumer<String> a = consumer(topic, SubscriptionType.Shared).receiverQueueSize(1).subscribe();
             Consumer<String> b = consumer(topic, SubscriptionType.Shared).receiverQueueSize(1).subscribe();
             Producer<String> p = producer(topic, false)) {
            for (int i = 0; i < 20; i++) {
                p.send("m" + i);
            }
            List<String> fromA = new ArrayList<>();
            List<String> fromB = new ArrayList<>();
            for (int round = 0; round < 40 && fromA.size() + fromB.size() < 20; round++) {
                Message<String> m = a.receive(200, TimeUnit.MILLISECONDS);
                if (m != null) { fromA.add(m.getValue()); a.acknowledge(m); }
                m = b.receive(200, TimeUnit.MILLISECONDS);
                if (m != null) { fromB.add(m.getValue()); b.acknowledge(m); }
            }
            assertEquals(20, fromA.size() + fromB.size(), "a " + fromA + " b " + fromB);
            assertFalse(fromA.isEmpty(), "consumer a got nothing");
            assertFalse(fromB.isEmpty(), "consumer b got nothing");
        }
    }

    @Test
    void failoverDeliversToOneConsumerAndFailsOverWhenItLeaves() throws Exception {
        String topic = Judge.topic("sub-failover");
        Consumer<String> a = consumer(topic, SubscriptionType.Failover).consumerName("a").subscribe();
        try (Consumer<String> b = consumer(topic, SubscriptionType.Failover).consumerName("b").subscribe();
             Producer<String> p = producer(topic, false)) {
            for (int i = 0; i < 5; i++) {
                p.send("m" + i);
            }
            Consumer<String> active = null;
            Consumer<String> standby = null;
            Message<String> first = a.receive(3, TimeUnit.SECONDS);
            if (first != null) { active = a; standby = b; } else {
                first = b.receive(5, TimeUnit.SECONDS);
                active = b; standby = a;
            }
            assertNotNull(first, "one of the failover consumers receives");
            active.acknowledge(first);
            List<String> got = new ArrayList<>(List.of(first.getValue()));
            got.addAll(drain(active, 1));
            assertEquals(List.of("m0", "m1", "m2", "m3", "m4"), got);
            assertNull(standby.receive(500, TimeUnit.MILLISECONDS), "the standby receives nothing");
            active.close();
            p.send("after");
            Message<String> m = standby.receive(10, TimeUnit.SECONDS);
            assertNotNull(m, "the standby takes over");
            assertEquals("after", m.getValue());
        } finally {
            if (a.isConnected()) a.close();
        }
    }

    @Test
    void keySharedKeepsEachKeyOnOneConsumer() throws Exception {
        String topic = Judge.topic("sub-keyshared");
        try (Consumer<String> a = consumer(topic, SubscriptionType.Key_Shared).subscribe();
             Consumer<String> b = consumer(topic, SubscriptionType.Key_Shared).subscribe();
             Producer<String> p = producer(topic, false)) {
            for (int i = 0; i < 40; i++) {
                p.newMessage().key("k" + (i % 8)).value("m" + i).send();
            }
            Map<String, Set<String>> owners = new HashMap<>();
            int total = 0;
            for (Consumer<String> c : List.of(a, b)) {
                Message<String> m;
                while ((m = c.receive(1, TimeUnit.SECONDS)) != null) {
                    owners.computeIfAbsent(m.getKey(), k -> new HashSet<>()).add(c.getConsumerName());
                    c.acknowledge(m);
                    total++;
                }
            }
            assertEquals(40, total);
            owners.forEach((k, who) -> assertEquals(1, who.size(), k + " went to " + who));
        }
    }

    @Test
    void cumulativeAckAcknowledgesEverythingUpToTheMessage() throws Exception {
        String topic = Judge.topic("ack-cumulative");
        try (Producer<String> p = producer(topic, false)) {
            Consumer<String> c = consumer(topic, SubscriptionType.Exclusive).subscribe();
            for (int i = 0; i < 10; i++) {
                p.send("m" + i);
            }
            Message<String> m = null;
            for (int i = 0; i < 6; i++) {
                m = c.receive(5, TimeUnit.SECONDS);
                assertNotNull(m);
            }
            c.acknowledgeCumulative(m); // up to m5
            c.close();
            try (Consumer<String> again = consumer(topic, SubscriptionType.Exclusive).subscribe()) {
                assertEquals(List.of("m6", "m7", "m8", "m9"), drain(again, 1));
            }
        }
    }

    /**
     * Pulsar 4.0.7 runs with acknowledgmentAtBatchIndexLevelEnabled=false by default: the broker
     * tracks acknowledgments per entry, so after acking half a batch and reconnecting the batch
     * comes back whole or not at all (both observed against Pulsar 4.0.7 standalone), never the
     * five unacknowledged messages alone.
     */
    @Test
    void batchIndexAckOnABrokerWithoutBatchIndexLevelAcksTheWholeEntry() throws Exception {
        String topic = Judge.topic("ack-batch-index");
        try (Producer<String> p = client.newProducer(Schema.STRING).topic(topic).enableBatching(true)
                .batchingMaxMessages(10).batchingMaxPublishDelay(1, TimeUnit.SECONDS).create()) {
            Consumer<String> c = consumer(topic, SubscriptionType.Shared).enableBatchIndexAcknowledgment(true)
                    .subscribe();
            for (int i = 0; i < 10; i++) {
                p.sendAsync("m" + i);
            }
            p.flush();
            for (int i = 0; i < 10; i++) {
                Message<String> m = c.receive(5, TimeUnit.SECONDS);
                assertNotNull(m);
                if (i % 2 == 0) {
                    c.acknowledge(m);
                }
            }
            c.close(); // flushes the pending acks with their ack sets
            try (Consumer<String> again = consumer(topic, SubscriptionType.Shared)
                    .enableBatchIndexAcknowledgment(true).subscribe()) {
                List<String> got = drain(again, 2);
                assertTrue(got.isEmpty() || got.size() == 10, "entry-level acknowledgment: " + got);
            }
        }
    }

    @Test
    void negativeAckRedeliversWithARedeliveryCount() throws Exception {
        String topic = Judge.topic("ack-negative");
        try (Consumer<String> c = consumer(topic, SubscriptionType.Shared)
                .negativeAckRedeliveryDelay(500, TimeUnit.MILLISECONDS).subscribe();
             Producer<String> p = producer(topic, false)) {
            p.send("again");
            Message<String> m = c.receive(5, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals(0, m.getRedeliveryCount());
            c.negativeAcknowledge(m);
            Message<String> back = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(back, "redelivered after the nack");
            assertEquals("again", back.getValue());
            assertEquals(1, back.getRedeliveryCount());
            c.acknowledge(back);
        }
    }

    @Test
    void ackTimeoutRedeliversWhatIsNotAcknowledged() throws Exception {
        String topic = Judge.topic("ack-timeout");
        try (Consumer<String> c = consumer(topic, SubscriptionType.Shared)
                .ackTimeout(1, TimeUnit.SECONDS).ackTimeoutTickTime(100, TimeUnit.MILLISECONDS).subscribe();
             Producer<String> p = producer(topic, false)) {
            p.send("late");
            Message<String> m = c.receive(5, TimeUnit.SECONDS);
            assertNotNull(m);
            Message<String> back = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(back, "redelivered after the ack timeout");
            assertEquals("late", back.getValue());
            assertEquals(1, back.getRedeliveryCount());
            c.acknowledge(back);
        }
    }

    @Test
    void deadLetterTopicReceivesWhatExceedsMaxRedeliveries() throws Exception {
        String topic = Judge.topic("dlq");
        String dlq = topic + "-judge-DLQ";
        try (Consumer<String> dead = client.newConsumer(Schema.STRING).topic(dlq).subscriptionName("dead")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Consumer<String> c = consumer(topic, SubscriptionType.Shared)
                     .negativeAckRedeliveryDelay(200, TimeUnit.MILLISECONDS)
                     .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).deadLetterTopic(dlq).build())
                     .subscribe();
             Producer<String> p = producer(topic, false)) {
            p.newMessage().key("poison-key").value("poison").send();
            for (int attempt = 0; attempt <= 2; attempt++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, "attempt " + attempt);
                assertEquals(attempt, m.getRedeliveryCount());
                c.negativeAcknowledge(m);
            }
            Message<String> d = dead.receive(15, TimeUnit.SECONDS);
            assertNotNull(d, "the message reaches the dead-letter topic");
            assertEquals("poison", d.getValue());
            assertEquals("poison-key", d.getKey());
            assertNull(c.receive(1, TimeUnit.SECONDS), "no more deliveries on the original topic");
        }
    }

    @Test
    void retryLetterTopicRedeliversWithReconsumeTimes() throws Exception {
        String topic = Judge.topic("retry");
        try (Consumer<String> c = consumer(topic, SubscriptionType.Shared).enableRetry(true)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(3).build()).subscribe();
             Producer<String> p = producer(topic, false)) {
            p.send("later");
            Message<String> m = c.receive(5, TimeUnit.SECONDS);
            assertNotNull(m);
            c.reconsumeLater(m, 1, TimeUnit.SECONDS);
            Message<String> back = c.receive(15, TimeUnit.SECONDS);
            assertNotNull(back, "back through the retry letter topic");
            assertEquals("later", back.getValue());
            assertEquals("1", back.getProperty("RECONSUMETIMES"));
            assertTrue(back.getTopicName().endsWith("-judge-RETRY"), back.getTopicName());
            c.acknowledge(back);
        }
    }
}
