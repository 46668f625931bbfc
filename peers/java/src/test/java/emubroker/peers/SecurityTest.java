package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/** TLS and token authentication: run.sh starts the standalone broker with both (not the cluster). */
@EnabledIfSystemProperty(named = "emubroker.mode", matches = "standalone",
        disabledReason = "the cluster run has neither TLS nor authentication")
class SecurityTest {

    @Test
    void tlsWithTheRunsCaAndATokenCarriesMessages() throws Exception {
        String topic = Judge.topic("tls");
        try (PulsarClient client = PulsarClient.builder().serviceUrl(Judge.TLS_SERVICE_URL)
                .tlsTrustCertsFilePath(Judge.TLS_TRUST_CERTS).enableTlsHostnameVerification(true)
                .authentication(AuthenticationFactory.token(Judge.TOKEN)).build();
             Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("judge")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
            p.send("over tls");
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("over tls", m.getValue());
        }
    }

    @Test
    void tlsWithoutTrustingTheCaFails() throws Exception {
        try (PulsarClient client = PulsarClient.builder().serviceUrl(Judge.TLS_SERVICE_URL)
                .authentication(AuthenticationFactory.token(Judge.TOKEN))
                .operationTimeout(5, TimeUnit.SECONDS).build()) {
            assertThrows(PulsarClientException.class,
                    () -> client.newProducer().topic(Judge.topic("untrusted")).create());
        }
    }

    @Test
    void withoutATokenTheBrokerRefusesTheConnection() throws Exception {
        try (PulsarClient client = PulsarClient.builder().serviceUrl(Judge.SERVICE_URL)
                .operationTimeout(5, TimeUnit.SECONDS).build()) {
            PulsarClientException e = assertThrows(PulsarClientException.class,
                    () -> client.newProducer().topic(Judge.topic("anonymous")).create());
            assertInstanceOf(PulsarClientException.AuthenticationException.class, e, e.toString());
        }
    }

    @Test
    void aTokenSignedWithAnotherKeyIsRefused() throws Exception {
        // A valid HS256 token for "judge" signed with a different 256-bit key.
        String forged = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJqdWRnZSJ9."
                + "hJPnOBGlgj5v4J1T3pSl2oPc-qFW0c1mZ6uMdS0m3Dw";
        try (PulsarClient client = PulsarClient.builder().serviceUrl(Judge.SERVICE_URL)
                .authentication(AuthenticationFactory.token(forged))
                .operationTimeout(5, TimeUnit.SECONDS).build()) {
            PulsarClientException e = assertThrows(PulsarClientException.class,
                    () -> client.newProducer().topic(Judge.topic("forged")).create());
            assertInstanceOf(PulsarClientException.AuthenticationException.class, e, e.toString());
        }
    }

    @Test
    void theAdminApiWantsTheTokenToo() throws Exception {
        java.net.http.HttpResponse<String> r = java.net.http.HttpClient.newHttpClient().send(
                java.net.http.HttpRequest.newBuilder(java.net.URI.create(Judge.adminUrls().get(0) + "/admin/v2/tenants")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
        assertEquals(401, r.statusCode(), r.body());
        assertEquals(200, Judge.admin("GET", "/admin/v2/tenants", null).status());
    }
}
