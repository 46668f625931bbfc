// What the official Java client observes of a broker, for the differential scenarios that the
// Python client cannot observe (it has no consumer event listener, no transactions, and never
// sends GET_OR_CREATE_SCHEMA). Run as a single-file program with the Java client of Pulsar's own
// jars (conformance/javaprobe.py):
//
//   java -cp "$(scripts/pulsar-standalone classpath)" conformance/java/ClientProbe.java URL JOB...
//
// Each JOB is one argument, "NAME MODE ARGS..." (space-separated): one JVM runs them all at once,
// each on its own thread with its own client and topic (a JVM's start costs seconds on a loaded
// machine, and the failover jobs mostly wait). Modes:
//   failover TOPIC DELAY_MS STEPS   consumers c1, c2, ... of one Failover subscription join and
//       leave (STEPS: "+c1,+c2,-active,..."); every becameActive/becameInactive the client hears,
//       in the order heard, with the step it came in and whether it came with the step's answer
//       or the broker's delay (DELAY_MS) later
//   multi-schema TOPIC   a producer without a schema sends messages of several schemas (each
//       new one is a GET_OR_CREATE_SCHEMA); each send's outcome
//   transactions   a client with transactions enabled; how its build fails
//
// Prints one line "PROBE-RESULT {json}", each job's result under its name (the client's own log
// lines may share stdout); a job that throws is recorded as {"probe_failed": ...}.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerEventListener;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionType;

public class ClientProbe {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        Map<String, CompletableFuture<Object>> running = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i++) {
            String[] job = args[i].split(" ");
            running.put(job[0], CompletableFuture.supplyAsync(
                    () -> run(url, job), Executors.newSingleThreadExecutor()));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, CompletableFuture<Object>> entry : running.entrySet()) {
            out.put(entry.getKey(), entry.getValue().get());
        }
        System.out.println("PROBE-RESULT " + new ObjectMapper().writeValueAsString(out));
        System.exit(0);
    }

    private static Object run(String url, String[] job) {
        try {
            return switch (job[1]) {
                case "failover" -> failover(url, job[2], Long.parseLong(job[3]), job[4]);
                case "multi-schema" -> multiSchema(url, job[2]);
                case "transactions" -> transactions(url);
                default -> throw new IllegalArgumentException("unknown mode " + job[1]);
            };
        } catch (Exception e) {
            return Map.of("probe_failed", e.toString());
        }
    }

    private static PulsarClient client(String url) throws Exception {
        // One IO thread and one listener thread: the listeners then run in the order the notices
        // arrive on the one connection (the default is a thread per core, each consumer pinned
        // to one, so two consumers' listeners would race).
        return PulsarClient.builder().serviceUrl(url).ioThreads(1).listenerThreads(1)
                .operationTimeout(10, TimeUnit.SECONDS).build();
    }

    private static String failure(Throwable t) {
        return t.getClass().getSimpleName();
    }

    // One failover job's step under way and when its call began (nanoTime), read by its
    // client's listener thread.
    private static final class Step {
        volatile String name = "";
        volatile long started = 0;
    }

    private static Map<String, Object> failover(String url, String topic, long delayMs, String steps)
            throws Exception {
        List<Map<String, Object>> heard = Collections.synchronizedList(new ArrayList<>());
        Map<String, Consumer<byte[]>> consumers = new LinkedHashMap<>();
        String[] active = {null};
        Step step = new Step();
        try (PulsarClient client = client(url)) {
            for (String s : steps.split(",")) {
                step.name = s;
                step.started = System.nanoTime();
                if (s.startsWith("+")) {
                    String name = s.substring(1);
                    ConsumerEventListener listener = new ConsumerEventListener() {
                        public void becameActive(Consumer<?> c, int partitionId) {
                            record(heard, step, name, true, delayMs);
                            active[0] = name;
                        }

                        public void becameInactive(Consumer<?> c, int partitionId) {
                            record(heard, step, name, false, delayMs);
                        }
                    };
                    consumers.put(name, client.newConsumer().topic(topic).subscriptionName("s")
                            .subscriptionType(SubscriptionType.Failover).consumerName(name)
                            .consumerEventListener(listener).subscribe());
                } else {
                    String name = s.substring(1).equals("active") ? active[0] : s.substring(1);
                    consumers.remove(name).close();
                }
                // Room for a loaded broker's late notice: one heard in the next step would be
                // counted there.
                Thread.sleep(delayMs + 1500);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("heard", heard);
        return out;
    }

    // A notice the broker sends with its answer comes within the call; one it sends the delay
    // after the change comes at least the delay after the call began (the change happens within
    // the call). So the time since the call began tells them apart, whatever the call's own
    // latency after the change (a loaded broker may answer a CLOSE_CONSUMER late).
    private static void record(
            List<Map<String, Object>> heard, Step step, String name, boolean active, long delayMs) {
        long sinceMs = (System.nanoTime() - step.started) / 1_000_000;
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("step", step.name);
        event.put("consumer", name);
        event.put("active", active);
        event.put("when", sinceMs < delayMs ? "with the answer" : "after the delay");
        heard.add(event);
    }

    public static class V1 {
        public String name;
    }

    public static class V2 {
        public String name;
        public Integer age;
    }

    public static class Retyped {
        public int name;
    }

    private static Map<String, Object> multiSchema(String url, String topic) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (PulsarClient client = client(url);
                Producer<byte[]> producer = client.newProducer().topic(topic).create()) {
            out.put("bytes", send(() -> producer.send("raw".getBytes())));
            out.put("json_v1", send(() -> producer.newMessage(Schema.JSON(V1.class)).value(new V1()).send()));
            out.put("json_v2", send(() -> producer.newMessage(Schema.JSON(V2.class)).value(new V2()).send()));
            out.put("json_v1_again",
                    send(() -> producer.newMessage(Schema.JSON(V1.class)).value(new V1()).send()));
            out.put("json_retyped",
                    send(() -> producer.newMessage(Schema.JSON(Retyped.class)).value(new Retyped()).send()));
            out.put("string", send(() -> producer.newMessage(Schema.STRING).value("s").send()));
            out.put("bytes_after", send(() -> producer.send("raw".getBytes())));
        }
        return out;
    }

    interface Call {
        Object run() throws Exception;
    }

    private static String send(Call call) {
        try {
            call.run();
            return "ok";
        } catch (Exception e) {
            return failure(e);
        }
    }

    private static Map<String, Object> transactions(String url) {
        Map<String, Object> out = new LinkedHashMap<>();
        try (PulsarClient client = PulsarClient.builder().serviceUrl(url).enableTransaction(true)
                .operationTimeout(10, TimeUnit.SECONDS).build()) {
            out.put("build", "ok");
            out.put("new_transaction", send(() -> client.newTransaction().build().get()));
        } catch (Exception e) {
            out.put("build", failure(e));
            out.put("message", e.getMessage());
        }
        return out;
    }
}
