package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageRouter;
import org.apache.pulsar.client.api.MessageRoutingMode;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.TopicMetadata;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class PartitionPatternTest {
    static PulsarClient client;

    @BeforeAll
    static void open() throws Exception {
        client = Judge.builder().build();
    }

    @AfterAll
    static void close() throws Exception {
        client.close();
    }

    /** Routes every message to the last partition the producer knows of. */
    static final class LastPartition implements MessageRouter {
        @Override
        public int choosePartition(Message<?> msg, TopicMetadata metadata) {
            return metadata.numPartitions() - 1;
        }
    }

    @Test
    void partitionedTopicsSpreadMessagesAndClientsSeeNewPartitions() throws Exception {
        String topic = Judge.topic("partitioned");
        String path = "/admin/v2/" + Judge.restPath(topic) + "/partitions";
        Judge.adminOk("PUT", path, "2");
        assertEquals(2, client.getPartitionsForTopic(topic).get(10, TimeUnit.SECONDS).size());
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("judge")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .autoUpdatePartitionsInterval(1, TimeUnit.SECONDS).subscribe();
             Producer<String> rr = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                     .messageRoutingMode(MessageRoutingMode.RoundRobinPartition).create();
             Producer<String> last = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                     .messageRouter(new LastPartition()).autoUpdatePartitionsInterval(1, TimeUnit.SECONDS)
                     .create()) {
            for (int i = 0; i < 4; i++) {
                rr.send("rr" + i);
            }
            Set<String> partitions = new HashSet<>();
            for (int i = 0; i < 4; i++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m);
                partitions.add(m.getTopicName());
                c.acknowledge(m);
            }
            assertEquals(Set.of(topic + "-partition-0", topic + "-partition-1"), partitions);

            Judge.adminOk("POST", path, "4"); // update: 2 -> 4 partitions
            assertEquals(4, client.getPartitionsForTopic(topic).get(10, TimeUnit.SECONDS).size());
            // The producer's router sees 4 partitions once its periodic check ran.
            String seen = null;
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < end && !(topic + "-partition-3").equals(seen)) {
                last.send("probe");
                Message<String> m = c.receive(5, TimeUnit.SECONDS);
                assertNotNull(m, "the consumer receives from the partitions it knows");
                seen = m.getTopicName();
                c.acknowledge(m);
            }
            assertEquals(topic + "-partition-3", seen, "producer and consumer both use the new partition");
        }
    }

    @Test
    void patternSubscriptionPicksUpNewTopics() throws Exception {
        String base = Judge.topic("pattern");
        String first = base + "-a";
        try (Producer<String> p = client.newProducer(Schema.STRING).topic(first).create()) {
            p.send("a0");
        }
        try (Consumer<String> c = client.newConsumer(Schema.STRING)
                .topicsPattern(Pattern.compile(base + "-.*"))
                .patternAutoDiscoveryPeriod(1, TimeUnit.SECONDS).subscriptionName("judge")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("a0", m.getValue());
            c.acknowledge(m);
            String second = base + "-b";
            try (Producer<String> p = client.newProducer(Schema.STRING).topic(second).create()) {
                p.send("b0");
            }
            m = c.receive(20, TimeUnit.SECONDS);
            assertNotNull(m, "the pattern consumer finds the new topic");
            assertEquals("b0", m.getValue());
            assertEquals(second, m.getTopicName());
        }
    }
}
