package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/** A 3-broker `emubroker cluster`: lookups from any broker, unload and SIGKILL of the owner. */
@EnabledIfSystemProperty(named = "emubroker.mode", matches = "cluster",
        disabledReason = "needs the 3-broker cluster run")
class ClusterTest {
    private static final Pattern BROKER_URL = Pattern.compile("\"brokerUrl\"\\s*:\\s*\"pulsar://[^:]+:(\\d+)\"");

    /** The index (in the service URL) of the broker that owns the topic, per the lookup of broker `via`. */
    static int owner(String topic, int via) throws Exception {
        String body = Judge.admin(Judge.adminUrls().get(via), "GET", "/lookup/v2/topic/" + Judge.restPath(topic), null).body();
        Matcher m = BROKER_URL.matcher(body);
        assertTrue(m.find(), body);
        List<String> brokers = Judge.brokerServiceUrls();
        for (int i = 0; i < brokers.size(); i++) {
            if (brokers.get(i).endsWith(":" + m.group(1))) {
                return i;
            }
        }
        throw new AssertionError("lookup names no broker of the cluster: " + body);
    }

    static void cluster(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("emubroker", "cluster"));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of("--run-dir", Judge.RUN_DIR));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "emubroker cluster " + String.join(" ", args));
        String out = new String(p.getInputStream().readAllBytes());
        assertEquals(0, p.exitValue(), out);
    }

    @Test
    void everyBrokerAnswersLookupsAndServesTheTopic() throws Exception {
        String topic = Judge.topic("lookup-any");
        Set<Integer> owners = new HashSet<>();
        for (int i = 0; i < Judge.adminUrls().size(); i++) {
            owners.add(owner(topic, i));
        }
        assertEquals(1, owners.size(), "every broker names the same owner");
        List<String> sent = new ArrayList<>();
        for (String url : Judge.brokerServiceUrls()) {
            try (PulsarClient client = Judge.builder(url).build();
                 Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
                p.send("via " + url);
                sent.add("via " + url);
            }
        }
        try (PulsarClient client = Judge.client();
             Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("judge")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            List<String> got = new ArrayList<>();
            for (int i = 0; i < sent.size(); i++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m);
                got.add(m.getValue());
            }
            assertEquals(sent, got);
        }
    }

    /** Sends `prefix`0..n-1 (asynchronously, so sends wait out an outage) and returns them. */
    static List<String> send(Producer<String> p, String prefix, int n) throws Exception {
        List<CompletableFuture<MessageId>> futures = new ArrayList<>();
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            values.add(prefix + i);
            futures.add(p.sendAsync(prefix + i));
        }
        CompletableFuture.allOf(futures.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
        return values;
    }

    /** Receives until every expected value came (duplicates after a failover are allowed). */
    static void receiveAll(Consumer<String> c, List<String> expected) throws Exception {
        Set<String> missing = new HashSet<>(expected);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!missing.isEmpty() && System.nanoTime() < end) {
            Message<String> m = c.receive(1, TimeUnit.SECONDS);
            if (m != null) {
                missing.remove(m.getValue());
                c.acknowledge(m);
            }
        }
        assertTrue(missing.isEmpty(), "never received: " + missing);
    }

    @Test
    void aConsumerKeepsReceivingThroughAnUnloadAndASigkillOfTheOwner() throws Exception {
        String topic = Judge.topic("failover");
        try (PulsarClient client = Judge.client();
             Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("judge")
                     .subscriptionType(SubscriptionType.Failover)
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                     .sendTimeout(120, TimeUnit.SECONDS).create()) {
            receiveAll(c, send(p, "before-", 10));

            int first = owner(topic, 0);
            int other = (first + 1) % Judge.adminUrls().size();
            Judge.Reply unload = Judge.admin(Judge.adminUrls().get(other), "PUT",
                    "/admin/v2/" + Judge.restPath(topic) + "/unload", null);
            assertEquals(204, unload.status(), unload.body());
            receiveAll(c, send(p, "after-unload-", 10));

            int victim = owner(topic, other);
            cluster("kill", String.valueOf(victim), "--signal", "KILL");
            try {
                receiveAll(c, send(p, "after-kill-", 10));
                int now = owner(topic, (victim + 1) % Judge.adminUrls().size());
                assertNotEquals(victim, now, "another broker owns the topic after the SIGKILL");
                assertTrue(c.isConnected());
            } finally {
                cluster("start", String.valueOf(victim));
            }
        }
    }
}
