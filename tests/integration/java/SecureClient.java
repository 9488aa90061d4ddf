// Apache Kafka's own Java client against an Odradek cluster, for
// tests/integration/test_java_client.py. Run with the kafka-clients jars on the class path:
//
//   java -cp '.cache/kafka-java/*' SecureClient.java roundtrip CLIENT.properties TOPIC RECORDS REPLICAS
//   java -cp '.cache/kafka-java/*' SecureClient.java bad-login CLIENT.properties TOPIC [EXCEPTION]
//
// CLIENT.properties holds bootstrap.servers and the security settings (security.protocol,
// sasl.*, ssl.*); everything else is left at Kafka's defaults but for what each step sets.
//
// roundtrip: the AdminClient creates TOPIC (2 partitions, REPLICAS replicas); a
// KafkaProducer (acks=all, idempotence on) sends RECORDS records and waits for every
// acknowledgement; a KafkaConsumer in a group subscribes, polls until it has seen every
// record, and commits; the AdminClient describes the group while the consumer is in it and
// lists its committed offsets. Prints one line
//   {"produced": N, "consumed": N, "distinct": N, "committed": N, "group": "Stable", "members": 1}
// and exits 0; any failure prints its exception and exits 1.
//
// bad-login: an AdminClient and a KafkaProducer whose login must be refused. Prints
//   {"admin": "<exception class>", "producer": "<exception class>"}
// and exits 0 only if both got EXCEPTION (a class name; by default
// org.apache.kafka.common.errors.SaslAuthenticationException).

import java.io.FileReader;
import java.io.Reader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureClient {
    static final long TIMEOUT_S = 60;

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: SecureClient roundtrip|bad-login CLIENT.properties TOPIC [RECORDS REPLICAS | EXCEPTION]");
            System.exit(2);
        }
        int status;
        try {
            Properties client = new Properties();
            try (Reader in = new FileReader(args[1])) {
                client.load(in);
            }
            switch (args[0]) {
                case "roundtrip":
                    status = roundtrip(client, args[2], Integer.parseInt(args[3]), Short.parseShort(args[4]));
                    break;
                case "bad-login":
                    status = badLogin(client, args[2],
                            args.length > 3 ? args[3] : SaslAuthenticationException.class.getName());
                    break;
                default:
                    System.err.println("unknown mode " + args[0]);
                    status = 2;
            }
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.exit(status);
    }

    static Properties with(Properties base, Object... pairs) {
        Properties p = new Properties();
        p.putAll(base);
        for (int i = 0; i < pairs.length; i += 2) {
            p.put(pairs[i], pairs[i + 1]);
        }
        return p;
    }

    static int roundtrip(Properties client, String topic, int records, short replicas) throws Exception {
        String group = "java-" + topic;
        try (Admin admin = Admin.create(client)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, replicas))).all().get(TIMEOUT_S, TimeUnit.SECONDS);

            int produced = 0;
            Properties producerConfig = with(client,
                    ProducerConfig.ACKS_CONFIG, "all",
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true",
                    ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName(),
                    ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < records; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) {
                    RecordMetadata m = f.get(TIMEOUT_S, TimeUnit.SECONDS);
                    if (m.hasOffset()) {
                        produced++;
                    }
                }
            }

            int consumed = 0;
            Set<String> values = new HashSet<>();
            String state;
            int members;
            Properties consumerConfig = with(client,
                    ConsumerConfig.GROUP_ID_CONFIG, group,
                    ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                    ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
                    ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName(),
                    ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
                while (values.size() < records && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        consumed++;
                        if (!r.key().equals("k" + r.value().substring(1))) {
                            throw new IllegalStateException("key " + r.key() + " with value " + r.value());
                        }
                        values.add(r.value());
                    }
                }
                consumer.commitSync(Duration.ofSeconds(TIMEOUT_S));
                // Described while the consumer is still a member of its group.
                ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group))
                        .all().get(TIMEOUT_S, TimeUnit.SECONDS).get(group);
                state = description.groupState().toString();
                members = description.members().size();
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(TIMEOUT_S, TimeUnit.SECONDS);
            long committed = 0;
            for (OffsetAndMetadata o : offsets.values()) {
                committed += o.offset();
            }
            System.out.printf(
                    "{\"produced\": %d, \"consumed\": %d, \"distinct\": %d, \"committed\": %d, "
                            + "\"group\": \"%s\", \"members\": %d}%n",
                    produced, consumed, values.size(), committed, state, members);
            return produced == records && values.size() == records && committed == records ? 0 : 1;
        }
    }

    static Throwable root(Throwable e) {
        while ((e instanceof ExecutionException || e.getClass() == org.apache.kafka.common.KafkaException.class)
                && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    static int badLogin(Properties client, String topic, String expected) {
        String admin = "none";
        try (Admin a = Admin.create(with(client, "default.api.timeout.ms", "30000"))) {
            a.describeCluster().nodes().get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (Throwable e) {
            admin = root(e).getClass().getName();
        }
        String producer = "none";
        Properties producerConfig = with(client,
                ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000",
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName(),
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerConfig)) {
            p.send(new ProducerRecord<>(topic, "k", "v")).get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (Throwable e) {
            producer = root(e).getClass().getName();
        }
        System.out.printf("{\"admin\": \"%s\", \"producer\": \"%s\"}%n", admin, producer);
        return admin.equals(expected) && producer.equals(expected) ? 0 : 1;
    }
}
