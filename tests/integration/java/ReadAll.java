// Reads one partition from its start to its end with Apache Kafka's own KafkaConsumer and
// prints one JSON line: {"records": [[offset, key, value or null], ...]}. Run in
// source-file mode: java -cp 'JARS/*' ReadAll.java BOOTSTRAP TOPIC
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

public class ReadAll {
    static String quoted(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        TopicPartition partition = new TopicPartition(args[1], 0);
        StringBuilder out = new StringBuilder("{\"records\": [");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.currentTimeMillis() + 60_000;
            boolean first = true;
            while (consumer.position(partition) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    out.append(first ? "" : ", ").append("[").append(r.offset()).append(", ")
                        .append(quoted(r.key())).append(", ").append(quoted(r.value())).append("]");
                    first = false;
                }
            }
            out.append("], \"position\": ").append(consumer.position(partition))
                .append(", \"end\": ").append(end).append("}");
        }
        System.out.println(out);
    }
}
