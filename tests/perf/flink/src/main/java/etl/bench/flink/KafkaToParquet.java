package etl.bench.flink;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.core.fs.Path;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.formats.common.TimestampFormat;
import org.apache.flink.formats.json.JsonParserRowDataDeserializationSchema;
import org.apache.flink.formats.parquet.row.ParquetRowDataBuilder;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.BucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.OutputFileConfig;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.SimpleVersionedStringSerializer;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.BooleanType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.TimestampType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The Flink peer of the side-by-side bench and the crash comparison (tests/perf/flink_peer.py):
 * what a Flink user writes to get a Kafka topic of JSON events into Hive-style Parquet folders.
 *
 * <p>KafkaSource from the earliest offsets (bounded at the latest offsets with --bounded, so that
 * the bench's run ends; unbounded otherwise), the JSON value parsed by flink-json into the columns
 * of warehouse_schema/events.sql, plus Kafka's topic, partition, offset and timestamp, into a
 * FileSink of bulk Parquet (RowData through ParquetRowDataBuilder, snappy), bucketed by the Kafka
 * timestamp in UTC into dt=YYYY-MM-DD/hour=HH, as the Spark peer partitions. Exactly-once
 * checkpoints every --checkpoint-interval-ms into --checkpoints, retained on cancellation and
 * failure; a run restores from the newest retained checkpoint there, as `flink run -s` would.
 * A local MiniCluster (one JVM) at --parallelism.
 *
 * <p>It prints JSON lines on stdout: {"event": "started"}, {"event": "first_record"} when a first
 * record is deserialized, and {"event": "finished", ...} when a bounded run ends (its JVM's start, its
 * first and last record deserialized, its end after the final checkpoint and commit).
 */
public final class KafkaToParquet {

    static final String[] EVENT_NAMES = {"event_id", "user_id", "action", "amount", "ts", "ok"};
    static final LogicalType[] EVENT_TYPES = {
        new BigIntType(), new VarCharType(VarCharType.MAX_LENGTH), new VarCharType(VarCharType.MAX_LENGTH),
        new DoubleType(), new TimestampType(3), new BooleanType()};
    static final String[] KAFKA_NAMES = {"kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp"};
    static final LogicalType[] KAFKA_TYPES = {
        new VarCharType(VarCharType.MAX_LENGTH), new IntType(), new BigIntType(), new TimestampType(3)};

    static final AtomicLong FIRST_RECORD_MS = new AtomicLong();
    static final AtomicLong LAST_RECORD_MS = new AtomicLong();
    static final LongAdder RECORDS = new LongAdder();

    private KafkaToParquet() {}

    static RowType eventType() {
        return RowType.of(EVENT_TYPES, EVENT_NAMES);
    }

    static RowType outputType() {
        LogicalType[] types = new LogicalType[EVENT_TYPES.length + KAFKA_TYPES.length];
        String[] names = new String[types.length];
        System.arraycopy(EVENT_TYPES, 0, types, 0, EVENT_TYPES.length);
        System.arraycopy(KAFKA_TYPES, 0, types, EVENT_TYPES.length, KAFKA_TYPES.length);
        System.arraycopy(EVENT_NAMES, 0, names, 0, EVENT_NAMES.length);
        System.arraycopy(KAFKA_NAMES, 0, names, EVENT_NAMES.length, KAFKA_NAMES.length);
        return RowType.of(types, names);
    }

    /** The value through flink-json's parser, then the record's Kafka lineage appended. */
    static final class EventDeserializer implements KafkaRecordDeserializationSchema<RowData> {
        private static final long serialVersionUID = 1L;
        private final JsonParserRowDataDeserializationSchema json;

        EventDeserializer() {
            RowType events = eventType();
            // failOnMissingField false, ignoreParseErrors false: a value that is not JSON fails the job
            this.json = new JsonParserRowDataDeserializationSchema(
                    events, InternalTypeInfo.of(events), false, false, TimestampFormat.SQL);
        }

        @Override
        public void open(DeserializationSchema.InitializationContext context) throws Exception {
            json.open(context);
        }

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<RowData> out) throws IOException {
            json.deserialize(record.value(), new Collector<RowData>() {
                @Override
                public void collect(RowData event) {
                    out.collect(withLineage((GenericRowData) event, record));
                }

                @Override
                public void close() {}
            });
        }

        private static RowData withLineage(GenericRowData event, ConsumerRecord<byte[], byte[]> record) {
            GenericRowData row = new GenericRowData(EVENT_NAMES.length + KAFKA_NAMES.length);
            for (int i = 0; i < EVENT_NAMES.length; i++) {
                row.setField(i, event.getField(i));
            }
            int k = EVENT_NAMES.length;
            row.setField(k, StringData.fromString(record.topic()));
            row.setField(k + 1, record.partition());
            row.setField(k + 2, record.offset());
            row.setField(k + 3, TimestampData.fromEpochMillis(record.timestamp()));
            RECORDS.increment();
            LAST_RECORD_MS.lazySet(System.currentTimeMillis());
            if (FIRST_RECORD_MS.get() == 0 && FIRST_RECORD_MS.compareAndSet(0, System.currentTimeMillis())) {
                say("{\"event\": \"first_record\", \"ms\": " + FIRST_RECORD_MS.get() + "}");
            }
            return row;
        }

        @Override
        public TypeInformation<RowData> getProducedType() {
            return InternalTypeInfo.of(outputType());
        }
    }

    /** dt=YYYY-MM-DD/hour=HH of the record's Kafka timestamp, in UTC (the Spark peer's folders). */
    static final class KafkaHourBuckets implements BucketAssigner<RowData, String> {
        private static final long serialVersionUID = 1L;
        private static final DateTimeFormatter FOLDER =
                DateTimeFormatter.ofPattern("'dt='yyyy-MM-dd'/hour='HH").withZone(ZoneOffset.UTC);

        @Override
        public String getBucketId(RowData row, BucketAssigner.Context context) {
            long millis = row.getTimestamp(EVENT_NAMES.length + 3, 3).getMillisecond();
            return FOLDER.format(Instant.ofEpochMilli(millis));
        }

        @Override
        public SimpleVersionedSerializer<String> getSerializer() {
            return SimpleVersionedStringSerializer.INSTANCE;
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** The newest completed checkpoint under dir (DIR/JOB_ID/chk-N/_metadata), or null. */
    static File newestCheckpoint(File dir) {
        File best = null;
        long bestId = -1;
        File[] jobs = dir.listFiles(File::isDirectory);
        for (File job : jobs == null ? new File[0] : jobs) {
            File[] chks = job.listFiles(f -> f.getName().startsWith("chk-") && new File(f, "_metadata").isFile());
            for (File chk : chks == null ? new File[0] : chks) {
                long id = Long.parseLong(chk.getName().substring(4));
                if (id > bestId) {
                    bestId = id;
                    best = chk;
                }
            }
        }
        return best;
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        args.put("--parallelism", "2");
        args.put("--checkpoint-interval-ms", "10000");
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].equals("--bounded")) {
                args.put("--bounded", "true");
            } else if (argv[i].startsWith("--") && i + 1 < argv.length) {
                args.put(argv[i], argv[++i]);
            } else {
                throw new IllegalArgumentException("unexpected argument: " + argv[i]);
            }
        }
        for (String required : new String[] {"--bootstrap", "--topic", "--output", "--checkpoints"}) {
            if (!args.containsKey(required)) {
                throw new IllegalArgumentException("usage: KafkaToParquet --bootstrap HOST:PORT --topic T --output DIR "
                        + "--checkpoints DIR [--bounded] [--parallelism 2] [--checkpoint-interval-ms 10000] "
                        + "[--group-id ID]");
            }
        }
        return args;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        boolean bounded = args.containsKey("--bounded");
        String topic = args.get("--topic");
        File checkpoints = new File(args.get("--checkpoints")).getAbsoluteFile();
        File restore = newestCheckpoint(checkpoints);

        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL,
                Duration.ofMillis(Long.parseLong(args.get("--checkpoint-interval-ms"))));
        conf.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode.EXACTLY_ONCE);
        conf.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpoints.toURI().toString());
        if (restore != null) {
            conf.set(StateRecoveryOptions.SAVEPOINT_PATH, restore.toURI().toString());
        }
        int parallelism = Integer.parseInt(args.get("--parallelism"));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);

        KafkaSourceBuilder<RowData> source = KafkaSource.<RowData>builder()
                .setBootstrapServers(args.get("--bootstrap"))
                .setTopics(topic)
                .setGroupId(args.getOrDefault("--group-id", "flink-peer-" + topic))
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(new EventDeserializer());
        if (bounded) {
            source.setBounded(OffsetsInitializer.latest());
        }

        org.apache.hadoop.conf.Configuration parquet = new org.apache.hadoop.conf.Configuration();
        parquet.set("parquet.compression", "SNAPPY");  // the Spark peer's and our job's codec
        FileSink<RowData> sink = FileSink
                .forBulkFormat(new Path(new File(args.get("--output")).getAbsoluteFile().toURI()),
                        ParquetRowDataBuilder.createWriterFactory(outputType(), parquet, true))
                .withBucketAssigner(new KafkaHourBuckets())
                .withOutputFileConfig(OutputFileConfig.builder().withPartPrefix("part")
                        .withPartSuffix(".snappy.parquet").build())
                .build();

        // uids, as Flink's production checklist asks, so that a restart maps the checkpoint's state to its operators
        env.fromSource(source.build(), WatermarkStrategy.noWatermarks(), "kafka").uid("kafka")
                .sinkTo(sink).name("parquet").uid("parquet");

        long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime();
        say("{\"event\": \"started\", \"jvm_start_ms\": " + jvmStart + ", \"ms\": " + System.currentTimeMillis()
                + ", \"restored_from\": " + (restore == null ? "null" : "\"" + restore + "\"") + "}");
        JobExecutionResult result = env.execute("kafka-to-parquet " + topic);
        long end = System.currentTimeMillis();
        say("{\"event\": \"finished\", \"jvm_start_ms\": " + jvmStart + ", \"first_record_ms\": "
                + FIRST_RECORD_MS.get() + ", \"last_record_ms\": " + LAST_RECORD_MS.get() + ", \"end_ms\": " + end
                + ", \"net_runtime_ms\": " + result.getNetRuntime()
                + ", \"records_read\": " + RECORDS.sum() + "}");
        System.exit(0);  // the MiniCluster's non-daemon threads would otherwise keep the JVM a while
    }
}
