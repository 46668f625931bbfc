package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class ProducerTest {
    static PulsarClient client;

    @BeforeAll
    static void open() throws Exception {
        client = Judge.client();
    }

    @AfterAll
    static void close() throws Exception {
        client.close();
    }

    private Consumer<byte[]> consumer(String topic) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName("judge")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
    }

    @Test
    void batchingPacksMessagesIntoOneEntryWithBatchIndexes() throws Exception {
        String topic = Judge.topic("batch");
        try (Consumer<byte[]> c = consumer(topic);
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).enableBatching(true)
                     .batchingMaxMessages(10).batchingMaxPublishDelay(1, TimeUnit.SECONDS).create()) {
            List<CompletableFuture<MessageId>> sent = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                sent.add(p.sendAsync("m" + i));
            }
            p.flush();
            Set<String> entries = new HashSet<>();
            for (int i = 0; i < 10; i++) {
                MessageId id = sent.get(i).get(10, TimeUnit.SECONDS);
                entries.add(id.toString().replaceAll(":-?\\d+$", ""));
            }
            assertEquals(1, entries.size(), "ten batched messages share one entry: " + entries);
            for (int i = 0; i < 10; i++) {
                Message<byte[]> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, "message " + i);
                assertEquals("m" + i, new String(m.getData()));
                c.acknowledge(m);
            }
        }
    }

    @Test
    void chunkingCarriesAMessageLargerThanMaxMessageSize() throws Exception {
        String topic = Judge.topic("chunk");
        byte[] big = new byte[7 * 1024 * 1024]; // maxMessageSize is 5 MiB
        new Random(7).nextBytes(big);
        try (Consumer<byte[]> c = consumer(topic);
             Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false)
                     .enableChunking(true).create()) {
            p.send(big);
            Message<byte[]> m = c.receive(30, TimeUnit.SECONDS);
            assertNotNull(m);
            assertArrayEquals(big, m.getData());
            c.acknowledge(m);
        }
    }

    @Test
    void withoutChunkingTheTooLargeMessageIsRefused() throws Exception {
        String topic = Judge.topic("nochunk");
        try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false).create()) {
            assertThrows(PulsarClientException.InvalidMessageException.class,
                    () -> p.send(new byte[6 * 1024 * 1024]));
        }
    }

    @ParameterizedTest
    @EnumSource(value = CompressionType.class, names = {"LZ4", "ZLIB", "ZSTD", "SNAPPY"})
    void compressedMessagesComeBackIntact(CompressionType type) throws Exception {
        String topic = Judge.topic("compress-" + type.name().toLowerCase());
        byte[] payload = ("compress me " + "abc".repeat(2000)).getBytes();
        try (Consumer<byte[]> c = consumer(topic);
             Producer<byte[]> p = client.newProducer().topic(topic).compressionType(type)
                     .batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS).create()) {
            p.sendAsync(payload);
            p.sendAsync("second".getBytes());
            p.flush();
            Message<byte[]> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertArrayEquals(payload, m.getData());
            Message<byte[]> m2 = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m2);
            assertEquals("second", new String(m2.getData()));
        }
    }

    @Test
    void sharedAccessAllowsSeveralProducers() throws Exception {
        String topic = Judge.topic("shared-access");
        try (Producer<byte[]> a = client.newProducer().topic(topic).accessMode(ProducerAccessMode.Shared).create();
             Producer<byte[]> b = client.newProducer().topic(topic).accessMode(ProducerAccessMode.Shared).create()) {
            a.send("a".getBytes());
            b.send("b".getBytes());
        }
    }

    @Test
    void exclusiveAccessFencesASecondProducer() throws Exception {
        String topic = Judge.topic("exclusive-access");
        try (Producer<byte[]> a = client.newProducer().topic(topic).accessMode(ProducerAccessMode.Exclusive).create()) {
            PulsarClientException e = assertThrows(PulsarClientException.class, () ->
                    client.newProducer().topic(topic).accessMode(ProducerAccessMode.Exclusive).create());
            // Pulsar: "Topic has an existing exclusive producer" as ProducerFencedException.
            assertInstanceOf(PulsarClientException.ProducerFencedException.class, e, e.toString());
            PulsarClientException shared = assertThrows(PulsarClientException.class, () ->
                    client.newProducer().topic(topic).accessMode(ProducerAccessMode.Shared).create());
            assertInstanceOf(PulsarClientException.ProducerBusyException.class, shared, shared.toString());
            a.send("still mine".getBytes());
        }
    }

    @Test
    void waitForExclusiveGetsTheTopicWhenTheHolderLeaves() throws Exception {
        String topic = Judge.topic("wait-exclusive");
        Producer<byte[]> a = client.newProducer().topic(topic).accessMode(ProducerAccessMode.Exclusive).create();
        CompletableFuture<Producer<byte[]>> waiting =
                client.newProducer().topic(topic).accessMode(ProducerAccessMode.WaitForExclusive).createAsync();
        Thread.sleep(500); // a window in which the waiter must not have been given the topic
        assertFalse(waiting.isDone(), "WaitForExclusive must wait while the exclusive producer is there");
        a.close();
        try (Producer<byte[]> b = waiting.get(20, TimeUnit.SECONDS)) {
            b.send("now mine".getBytes());
        }
    }

    @Test
    void exclusiveWithFencingTakesTheTopicFromTheHolder() throws Exception {
        String topic = Judge.topic("fencing");
        try (Producer<byte[]> a = client.newProducer().topic(topic).accessMode(ProducerAccessMode.Exclusive)
                .sendTimeout(5, TimeUnit.SECONDS).create()) {
            a.send("first".getBytes());
            try (Producer<byte[]> b = client.newProducer().topic(topic)
                    .accessMode(ProducerAccessMode.ExclusiveWithFencing).create()) {
                b.send("second".getBytes());
                assertThrows(PulsarClientException.class, () -> a.send("fenced".getBytes()));
            }
        }
    }

    @Test
    void namespaceDeduplicationDropsRepeatedSequenceIds() throws Exception {
        String ns = "public/dedup-" + UUID.randomUUID().toString().substring(0, 6);
        Judge.adminOk("PUT", "/admin/v2/namespaces/" + ns, "{}");
        Judge.adminOk("POST", "/admin/v2/namespaces/" + ns + "/deduplication", "true");
        String topic = "persistent://" + ns + "/dedup";
        String name = "judge-producer";
        try (Consumer<byte[]> c = consumer(topic)) {
            try (Producer<byte[]> p = client.newProducer().topic(topic).producerName(name)
                    .enableBatching(false).create()) {
                for (long seq = 0; seq < 3; seq++) {
                    p.newMessage().sequenceId(seq).value(("v" + seq).getBytes()).send();
                }
            }
            try (Producer<byte[]> p = client.newProducer().topic(topic).producerName(name)
                    .enableBatching(false).create()) {
                assertEquals(2, p.getLastSequenceId(), "the broker tells the producer its last sequence id");
                for (long seq = 1; seq < 5; seq++) {
                    p.newMessage().sequenceId(seq).value(("w" + seq).getBytes()).send();
                }
            }
            List<String> got = new ArrayList<>();
            Message<byte[]> m;
            while ((m = c.receive(2, TimeUnit.SECONDS)) != null) {
                got.add(new String(m.getData()));
                c.acknowledge(m);
            }
            assertEquals(Arrays.asList("v0", "v1", "v2", "w3", "w4"), got);
        }
    }
}
