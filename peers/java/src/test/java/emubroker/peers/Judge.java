package emubroker.peers;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/** What run.sh passes (system properties), a client for it, and the admin REST API. */
final class Judge {
    static final String SERVICE_URL = required("emubroker.serviceUrl");
    static final String ADMIN_URLS = required("emubroker.adminUrl");
    static final String MODE = System.getProperty("emubroker.mode", "standalone");
    static final String TOKEN = System.getProperty("emubroker.token", "");
    static final String TLS_SERVICE_URL = System.getProperty("emubroker.tlsServiceUrl", "");
    static final String TLS_TRUST_CERTS = System.getProperty("emubroker.tlsTrustCerts", "");
    static final String RUN_DIR = System.getProperty("emubroker.runDir", "");

    private static final HttpClient HTTP =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))
                    // A broker that does not own the topic answers 307 to its owner, as Pulsar.
                    .followRedirects(HttpClient.Redirect.NORMAL).build();

    private Judge() {}

    private static String required(String name) {
        String value = System.getProperty(name, "");
        if (value.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run the tests with peers/java/run.sh");
        }
        return value;
    }

    /** A client builder for the service URL, with the run's token when there is one. */
    static ClientBuilder builder() {
        return builder(SERVICE_URL);
    }

    static ClientBuilder builder(String serviceUrl) {
        ClientBuilder b = PulsarClient.builder()
                .serviceUrl(serviceUrl)
                .operationTimeout(20, TimeUnit.SECONDS)
                .connectionTimeout(5, TimeUnit.SECONDS);
        if (!TOKEN.isEmpty()) {
            b.authentication(AuthenticationFactory.token(TOKEN));
        }
        return b;
    }

    static PulsarClient client() throws PulsarClientException {
        return builder().build();
    }

    /** A fresh topic in public/default. */
    static String topic(String prefix) {
        return "persistent://public/default/" + prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static List<String> adminUrls() {
        return List.of(ADMIN_URLS.split(","));
    }

    /** The service URL's brokers, each as its own pulsar:// URL. */
    static List<String> brokerServiceUrls() {
        List<String> out = new ArrayList<>();
        for (String hostPort : SERVICE_URL.substring("pulsar://".length()).split(",")) {
            out.add("pulsar://" + hostPort);
        }
        return out;
    }

    record Reply(int status, String body) {}

    /** One admin REST call on the first broker; body may be null. */
    static Reply admin(String method, String path, String body) throws Exception {
        return admin(adminUrls().get(0), method, path, body);
    }

    static Reply admin(String base, String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path))
                .timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body));
        if (!TOKEN.isEmpty()) {
            b.header("Authorization", "Bearer " + TOKEN);
        }
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        return new Reply(r.statusCode(), r.body());
    }

    /** An admin call that must succeed (2xx). */
    static String adminOk(String method, String path, String body) throws Exception {
        Reply r = admin(method, path, body);
        if (r.status() / 100 != 2) {
            throw new AssertionError(method + " " + path + " -> " + r.status() + " " + r.body());
        }
        return r.body();
    }

    /** "persistent://public/default/x" -> "persistent/public/default/x" (REST path). */
    static String restPath(String topic) {
        return topic.replace("://", "/");
    }

    /** Polls until the condition holds, at most the given seconds (no fixed sleeps). */
    static void await(String what, int seconds, BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < end) {
            if (condition.getAsBoolean()) {
                return;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("not within " + seconds + " s: " + what);
    }
}
