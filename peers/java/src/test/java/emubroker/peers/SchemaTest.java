package emubroker.peers;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.concurrent.TimeUnit;

import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.schema.GenericRecord;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class SchemaTest {
    static PulsarClient client;

    @BeforeAll
    static void open() throws Exception {
        client = Judge.client();
    }

    @AfterAll
    static void close() throws Exception {
        client.close();
    }

    /** A POJO for the AVRO and JSON schemas (public fields, no-arg constructor). */
    public static class Point {
        public int x;
        public String label;

        public Point() {}

        Point(int x, String label) {
            this.x = x;
            this.label = label;
        }
    }

    /** A different shape under the same topic: not compatible with Point (a required field gone). */
    public static class Other {
        public double weight;
    }

    private <T> Consumer<T> consumer(Schema<T> schema, String topic) throws Exception {
        return client.newConsumer(schema).topic(topic).subscriptionName("judge")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
    }

    @Test
    void avroRoundTripsAndAutoConsumeReadsTheFields() throws Exception {
        String topic = Judge.topic("avro");
        try (Consumer<Point> typed = consumer(Schema.AVRO(Point.class), topic);
             Consumer<GenericRecord> generic = client.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                     .subscriptionName("generic").subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                     .subscribe();
             Producer<Point> p = client.newProducer(Schema.AVRO(Point.class)).topic(topic).create()) {
            p.send(new Point(3, "three"));
            Point got = typed.receive(10, TimeUnit.SECONDS).getValue();
            assertEquals(3, got.x);
            assertEquals("three", got.label);
            GenericRecord r = generic.receive(10, TimeUnit.SECONDS).getValue();
            assertEquals(SchemaType.AVRO, r.getSchemaType());
            assertEquals(3, r.getField("x"));
            assertEquals("three", r.getField("label").toString());
        }
        String schemaPath = "/admin/v2/schemas/public/default/" + topic.substring(topic.lastIndexOf('/') + 1) + "/schema";
        String body = Judge.adminOk("GET", schemaPath, null);
        assertTrue(body.contains("\"type\":\"AVRO\""), body);
    }

    @Test
    void anIncompatibleSchemaIsRefused() throws Exception {
        String topic = Judge.topic("avro-incompatible");
        try (Producer<Point> p = client.newProducer(Schema.AVRO(Point.class)).topic(topic).create()) {
            p.send(new Point(1, "one"));
            assertThrows(PulsarClientException.IncompatibleSchemaException.class,
                    () -> client.newProducer(Schema.AVRO(Other.class)).topic(topic).create());
        }
    }

    @Test
    void jsonRoundTripsAndAutoConsumeReadsTheFields() throws Exception {
        String topic = Judge.topic("json");
        try (Consumer<Point> typed = consumer(Schema.JSON(Point.class), topic);
             Consumer<GenericRecord> generic = client.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                     .subscriptionName("generic").subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                     .subscribe();
             Producer<Point> p = client.newProducer(Schema.JSON(Point.class)).topic(topic).create()) {
            p.send(new Point(4, "four"));
            Point got = typed.receive(10, TimeUnit.SECONDS).getValue();
            assertEquals(4, got.x);
            assertEquals("four", got.label);
            GenericRecord r = generic.receive(10, TimeUnit.SECONDS).getValue();
            assertEquals(SchemaType.JSON, r.getSchemaType());
            assertEquals(4, ((Number) r.getField("x")).intValue());
        }
    }

    @Test
    void keyValueSeparatedCarriesTheKeyInTheMessageKey() throws Exception {
        String topic = Judge.topic("keyvalue");
        Schema<KeyValue<String, Integer>> schema =
                Schema.KeyValue(Schema.STRING, Schema.INT32, KeyValueEncodingType.SEPARATED);
        try (Consumer<KeyValue<String, Integer>> c = consumer(schema, topic);
             Producer<KeyValue<String, Integer>> p = client.newProducer(schema).topic(topic).create()) {
            p.send(new KeyValue<>("answer", 42));
            Message<KeyValue<String, Integer>> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("answer", m.getValue().getKey());
            assertEquals(42, m.getValue().getValue());
            assertTrue(m.hasKey());
        }
        try (Consumer<KeyValue<String, Integer>> inline = consumer(
                Schema.KeyValue(Schema.STRING, Schema.INT32, KeyValueEncodingType.INLINE), Judge.topic("kv-inline"))) {
            assertNotNull(inline);
        }
    }

    /** A PROTOBUF_NATIVE schema over bytes: the descriptor is built at runtime (no protoc). */
    static final class NativeProtobuf implements Schema<byte[]> {
        final Descriptors.Descriptor descriptor;
        final SchemaInfo info;

        NativeProtobuf() throws Exception {
            FileDescriptorProto file = FileDescriptorProto.newBuilder()
                    .setName("judge/point.proto").setPackage("judge").setSyntax("proto3")
                    .addMessageType(DescriptorProto.newBuilder().setName("Point")
                            .addField(FieldDescriptorProto.newBuilder().setName("x").setNumber(1)
                                    .setType(FieldDescriptorProto.Type.TYPE_INT32)
                                    .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL))
                            .addField(FieldDescriptorProto.newBuilder().setName("label").setNumber(2)
                                    .setType(FieldDescriptorProto.Type.TYPE_STRING)
                                    .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL)))
                    .build();
            descriptor = Descriptors.FileDescriptor.buildFrom(file, new Descriptors.FileDescriptor[0])
                    .findMessageTypeByName("Point");
            // ProtobufNativeSchemaData, as the Java client's ProtobufNativeSchema writes it.
            String set = Base64.getEncoder().encodeToString(FileDescriptorSet.newBuilder().addFile(file).build().toByteArray());
            String json = "{\"fileDescriptorSet\":\"" + set + "\",\"rootMessageTypeName\":\"judge.Point\","
                    + "\"rootFileDescriptorName\":\"judge/point.proto\"}";
            info = SchemaInfo.builder().name("point").type(SchemaType.PROTOBUF_NATIVE)
                    .schema(json.getBytes(StandardCharsets.UTF_8)).properties(Collections.emptyMap()).build();
        }

        byte[] point(int x, String label) {
            return DynamicMessage.newBuilder(descriptor).setField(descriptor.findFieldByName("x"), x)
                    .setField(descriptor.findFieldByName("label"), label).build().toByteArray();
        }

        @Override
        public byte[] encode(byte[] message) {
            return message;
        }

        @Override
        public byte[] decode(byte[] bytes, byte[] schemaVersion) {
            return bytes;
        }

        @Override
        public SchemaInfo getSchemaInfo() {
            return info;
        }

        @Override
        public Schema<byte[]> clone() {
            return this;
        }
    }

    @Test
    void protobufNativeRegistersItsDescriptorAndAutoConsumeDecodesIt() throws Exception {
        String topic = Judge.topic("protobuf-native");
        NativeProtobuf schema = new NativeProtobuf();
        try (Consumer<GenericRecord> generic = client.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                .subscriptionName("generic").subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe();
             Producer<byte[]> p = client.newProducer(schema).topic(topic).create()) {
            p.send(schema.point(5, "five"));
            Message<GenericRecord> m = generic.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals(SchemaType.PROTOBUF_NATIVE, m.getValue().getSchemaType());
            assertEquals(5, m.getValue().getField("x"));
            assertEquals("five", m.getValue().getField("label"));
        }
        String schemaPath = "/admin/v2/schemas/public/default/" + topic.substring(topic.lastIndexOf('/') + 1) + "/schema";
        String body = Judge.adminOk("GET", schemaPath, null);
        assertTrue(body.contains("PROTOBUF_NATIVE"), body);
    }
}
