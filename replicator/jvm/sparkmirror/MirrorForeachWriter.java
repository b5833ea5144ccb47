package sparkmirror;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.DefaultRecord;
import org.apache.kafka.common.record.DefaultRecordBatch;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.python.streaming.PythonForeachWriter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The real-time data path's writer. Spark runs one instance per Kafka partition and
 * real-time batch in the executors; it copies every row of its partition to the renamed
 * topic on the target (same partition, key, value, headers in order, timestamp), as
 * sparkmirror's Python writer does for micro-batches.
 *
 * <p>Offset-syncs follow MM2's emission rule, as {@code sparkmirror/model/offsets.py}'s
 * OffsetSyncEmitter states it: each record's delivery report carries the record's own
 * upstream offset, so a downstream offset is paired with the right record whatever order
 * reports arrive in; a sync goes out at once when it is the partition's first, when the
 * downstream offset moved {@code offset.lag.max} or more past the last one sent, on an
 * upstream gap, or when the downstream offset went backwards; otherwise the newest is kept
 * pending and sent within half a second (and at every batch end).
 *
 * <p>Nothing is skipped: a failed delivery fails the task, so the batch is not committed
 * and Spark replays it (at-least-once). A record the target can never take (larger than the
 * target topic's {@code max.message.bytes}, checked before it is sent when the producer does
 * not compress; or rejected as too large, invalid or unauthorized) stops the flow: nothing
 * after it in its partition is sent, and the task's retries in this JVM fail at once instead
 * of copying the records before it again. {@link #close} waits for every record of the task
 * and its syncs before the batch may commit. (Records deleted on the source before they
 * were read never show up here as a gap: Spark's real-time Kafka reader fails on them, and
 * the driver reports the loss and moves the partition; see realtime.adjust_resume.)
 *
 * <p>Per executor JVM, producers are shared (their connections and metadata are worth
 * keeping across batches) and so is each partition's emitter state (pacing stays exact
 * across batch boundaries). Counters are kept per flow for the driver to read
 * ({@link #counters}, {@link #positions}) when it shares the JVM (local mode).
 *
 * <p>It extends Spark's {@code PythonForeachWriter}, an internal class, without its Python:
 * Spark's foreach sink turns every row into an external {@code Row} (objects for each
 * column, the timestamp converted through a calendar) before it calls a writer, except for
 * that class, which is handed the source's {@code UnsafeRow} as it is: reading the row's
 * bytes directly saves that conversion per record (bench/NOTES.md). Every method of
 * PythonForeachWriter is overridden, so its Python function is never asked for. Should a
 * Spark drop the class, this file does not build and the flows run in micro-batches (said at
 * start-up).
 */
public class MirrorForeachWriter extends PythonForeachWriter {
    private static final long serialVersionUID = 1L;
    public static final String ERROR_MARKER = "SPARKMIRROR_WRITE_ERROR";

    private final String flow;
    private final String targetCluster;
    private final HashMap<String, String> producerConfig;
    private final HashMap<String, String> syncsProducerConfig; // null: emit.offset-syncs.enabled = false
    private final String syncsTopic;
    private final HashMap<String, String> topicMap;
    private final long offsetLagMax;
    private final HashMap<String, Integer> maxMessageBytes; // target topic -> its max.message.bytes
    private final boolean uncompressed;
    private final StructType schema; // the query's rows, whose columns are found by name

    private transient Producer<byte[], byte[]> producer;
    private transient Producer<byte[], byte[]> syncsProducer;
    private transient AtomicReference<String> failure;
    private transient AtomicLong outstanding;
    private transient String lastTopic;
    private transient UTF8String lastTopicBytes;
    private transient String lastTarget;
    private transient int lastPartition = -1;
    private transient PartitionState lastState;
    // Where each column is in the rows: found by name in the first row's schema.
    private transient int[] columns;
    private transient long[] counters;

    public MirrorForeachWriter(String flow, String targetCluster,
                               Map<String, String> producerConfig, Map<String, String> syncsProducerConfig,
                               String syncsTopic, Map<String, String> topicMap, long offsetLagMax,
                               Map<String, String> maxMessageBytes, String schemaJson) {
        this(flow, targetCluster, producerConfig, syncsProducerConfig, syncsTopic, topicMap, offsetLagMax,
                maxMessageBytes, (StructType) DataType.fromJson(schemaJson));
    }

    private MirrorForeachWriter(String flow, String targetCluster,
                                Map<String, String> producerConfig, Map<String, String> syncsProducerConfig,
                                String syncsTopic, Map<String, String> topicMap, long offsetLagMax,
                                Map<String, String> maxMessageBytes, StructType schema) {
        // No Python function: every method PythonForeachWriter runs Python from is overridden.
        super(null, schema);
        this.schema = schema;
        this.flow = flow;
        this.targetCluster = targetCluster;
        this.producerConfig = new HashMap<>(producerConfig);
        this.syncsProducerConfig = syncsProducerConfig == null ? null : new HashMap<>(syncsProducerConfig);
        this.syncsTopic = syncsTopic;
        this.topicMap = new HashMap<>(topicMap);
        this.offsetLagMax = offsetLagMax;
        this.maxMessageBytes = new HashMap<>();
        for (Map.Entry<String, String> e : maxMessageBytes.entrySet()) {
            this.maxMessageBytes.put(e.getKey(), Integer.parseInt(e.getValue()));
        }
        String compression = producerConfig.getOrDefault("compression.type", "none").trim();
        this.uncompressed = compression.isEmpty() || compression.equalsIgnoreCase("none");
    }

    // ---------------------------------------------------------------- shared per JVM
    static final ConcurrentHashMap<String, Producer<byte[], byte[]>> PRODUCERS = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<String, PartitionState> STATES = new ConcurrentHashMap<>();
    // per flow: records, bytes, offset-syncs sent, max latency ms (since the last read)
    private static final ConcurrentHashMap<String, long[]> COUNTERS = new ConcurrentHashMap<>();
    // per flow: the record the target can never take (see the class comment); cleared by reset
    private static final ConcurrentHashMap<String, String> PERMANENT = new ConcurrentHashMap<>();
    private static final ScheduledExecutorService PENDING_FLUSHER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "sparkmirror-offset-syncs");
        t.setDaemon(true);
        return t;
    });

    static {
        PENDING_FLUSHER.scheduleWithFixedDelay(MirrorForeachWriter::flushAllPending, 500, 500, TimeUnit.MILLISECONDS);
    }

    private static String configKey(Map<String, String> config) {
        return new TreeMap<>(config).toString();
    }

    private static Producer<byte[], byte[]> producerFor(Map<String, String> config) {
        return PRODUCERS.computeIfAbsent(configKey(config), k -> {
            Properties props = new Properties();
            props.putAll(config);
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            return new KafkaProducer<>(props);
        });
    }

    /** Records, bytes, offset-syncs, max latency (ms, reset by this read). */
    public static long[] counters(String flow) {
        long[] c = COUNTERS.computeIfAbsent(flow, f -> new long[4]);
        synchronized (c) {
            long[] out = c.clone();
            c[3] = 0;
            return out;
        }
    }

    /**
     * "topic\tpartition\tnext offset" lines: where each partition's copy has got to, i.e. every
     * record before that offset was acknowledged by the target. A partition with a failed record
     * stops before it, whatever was acknowledged after it.
     */
    public static String positions(String flow) {
        StringBuilder sb = new StringBuilder();
        String prefix = flow + "\u0000";
        for (Map.Entry<String, PartitionState> e : STATES.entrySet()) {
            if (!e.getKey().startsWith(prefix)) continue;
            PartitionState s = e.getValue();
            long next = s.next();
            if (next > 0) sb.append(s.topic).append('\t').append(s.partition).append('\t').append(next).append('\n');
        }
        return sb.toString();
    }

    /**
     * Sends every pending offset-sync and waits until each producer of this JVM has every record
     * it was given acknowledged or failed: after a query's tasks ended, {@link #positions} is then
     * final. Returns the first offset-sync failure, or null. Waits at most {@code timeoutMs}: a
     * producer's flush has no bound of its own (records to an unreachable target wait for their
     * delivery timeout, 2 minutes by default), and a stop must not; past it, says so.
     */
    public static String flushAll(long timeoutMs) {
        flushAllPending();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        List<Thread> flushes = new ArrayList<>();
        for (Producer<byte[], byte[]> p : PRODUCERS.values()) {
            Thread t = new Thread(p::flush, "sparkmirror-flush");
            t.setDaemon(true); // one left waiting on an unreachable target does not hold the JVM
            t.start();
            flushes.add(t);
        }
        for (Thread t : flushes) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            try {
                if (left > 0) t.join(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (t.isAlive()) {
                return "the target did not acknowledge every record within " + (timeoutMs / 1000.0)
                        + " s (is it reachable?)";
            }
        }
        for (PartitionState s : STATES.values()) {
            String f = s.failure;
            if (f != null) return f;
        }
        return null;
    }

    /** Forget a flow's partition states (its query starts over from a checkpoint). */
    public static void reset(String flow) {
        PERMANENT.remove(flow);
        String prefix = flow + "\u0000";
        for (Map.Entry<String, PartitionState> e : STATES.entrySet()) {
            if (!e.getKey().startsWith(prefix)) continue;
            e.getValue().flushPending();
            STATES.remove(e.getKey());
        }
    }

    /** One partition: MM2's emitter state, where its syncs go, what was read and acknowledged. */
    /**
     * MM2's OffsetSync key: the upstream topic as a Kafka STRING (INT16 length, UTF-8 bytes), then
     * the upstream partition as an INT32. sparkmirror/model/records.py defines the same bytes; a
     * test compares the two on generated vectors.
     */
    static byte[] offsetSyncKey(String topic, int partition) {
        byte[] name = topic.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(2 + name.length + 4).putShort((short) name.length).put(name)
                .putInt(partition).array();
    }

    /** MM2's OffsetSync value: the upstream offset, then the downstream offset, each an INT64. */
    static byte[] offsetSyncValue(long upstream, long downstream) {
        return ByteBuffer.allocate(16).putLong(upstream).putLong(downstream).array();
    }

    static final class PartitionState {
        final String topic;
        final int partition;
        final Producer<byte[], byte[]> syncs; // null: no offset-syncs
        final String syncsTopic;
        final long offsetLagMax;
        final long[] counters;
        volatile long ackedUpstream = -1; // newest offset acknowledged by the target
        // offsets the target did not take (and no retried task copied since): rare, so a small set
        private final java.util.TreeSet<Long> failedUpstream = new java.util.TreeSet<>();
        boolean started;
        long previousUpstream;
        long previousDownstream;
        long lastSyncDownstream;
        long pendingUpstream = -1;
        long pendingDownstream = -1;
        volatile String failure;

        PartitionState(String topic, int partition, Producer<byte[], byte[]> syncs, String syncsTopic,
                       long offsetLagMax, long[] counters) {
            this.topic = topic;
            this.partition = partition;
            this.syncs = syncs;
            this.syncsTopic = syncsTopic;
            this.offsetLagMax = offsetLagMax;
            this.counters = counters;
        }

        synchronized void delivered(long upstream, long downstream) {
            if (upstream > ackedUpstream) ackedUpstream = upstream;
            // a retried task copied a failed record after all (reports come in order: all before it too)
            if (!failedUpstream.isEmpty()) failedUpstream.remove(upstream);
            if (syncs == null) return;
            boolean sendNow;
            if (!started) {
                started = true;
                previousUpstream = upstream;
                previousDownstream = downstream;
                lastSyncDownstream = downstream;
                sendNow = true;
            } else {
                sendNow = downstream - (lastSyncDownstream + 1) >= offsetLagMax
                        || upstream - previousUpstream != 1
                        || downstream < previousDownstream;
                previousUpstream = upstream;
                previousDownstream = downstream;
                if (sendNow) lastSyncDownstream = downstream;
            }
            if (sendNow) {
                pendingUpstream = -1;
                send(upstream, downstream);
            } else {
                pendingUpstream = upstream;
                pendingDownstream = downstream;
            }
        }

        /** The offset before which every record of this partition was acknowledged (0: none yet). */
        synchronized long next() {
            return failedUpstream.isEmpty() ? ackedUpstream + 1 : Math.min(ackedUpstream + 1, failedUpstream.first());
        }

        synchronized void failed(long upstream) {
            failedUpstream.add(upstream);
        }

        synchronized void flushPending() {
            if (pendingUpstream >= 0) {
                send(pendingUpstream, pendingDownstream);
                pendingUpstream = -1;
            }
        }

        private void send(long upstream, long downstream) {
            byte[] key = offsetSyncKey(topic, partition);
            byte[] value = offsetSyncValue(upstream, downstream);
            // Partition 0, as MM2 writes it: MM2's OffsetSyncStore reads nothing else.
            syncs.send(new ProducerRecord<>(syncsTopic, 0, key, value), (md, err) -> {
                if (err != null) {
                    if (failure == null) {
                        failure = "the offset-sync of " + topic + "/" + partition + " (upstream " + upstream
                                + ") could not be written to " + syncsTopic + ": " + err;
                    }
                } else {
                    synchronized (counters) {
                        counters[2]++;
                    }
                }
            });
        }
    }

    private static void flushAllPending() {
        for (PartitionState s : STATES.values()) {
            try {
                s.flushPending();
            } catch (RuntimeException e) {
                s.failure = "sending a pending offset-sync failed: " + e;
            }
        }
    }

    private PartitionState stateFor(String topic, int partition) {
        String key = flow + "\u0000" + topic + "\u0000" + partition;
        return STATES.computeIfAbsent(key, k -> {
            return new PartitionState(topic, partition, syncsProducer, syncsTopic, offsetLagMax, counters);
        });
    }

    // ---------------------------------------------------------------- ForeachWriter
    @Override
    public boolean open(long partitionId, long epochId) {
        String permanent = PERMANENT.get(flow);
        if (permanent != null) throw new IllegalStateException(permanent);
        producer = producerFor(producerConfig);
        syncsProducer = syncsProducerConfig == null ? null : producerFor(syncsProducerConfig);
        failure = new AtomicReference<>();
        outstanding = new AtomicLong();
        counters = COUNTERS.computeIfAbsent(flow, f -> new long[4]);
        return true;
    }

    static boolean isPermanent(Exception e) {
        return e instanceof RecordTooLargeException || e instanceof RecordBatchTooLargeException
                || e instanceof InvalidRecordException || e instanceof AuthorizationException
                || e instanceof PolicyViolationException || e instanceof InvalidTimestampException;
    }

    /** The size of a record as a batch of one on the wire (what the broker checks against max.message.bytes). */
    static int sizeAsBatch(byte[] key, byte[] value, List<Header> headers) {
        Header[] hs = headers == null ? new Header[0] : headers.toArray(new Header[0]);
        return DefaultRecordBatch.RECORD_BATCH_OVERHEAD + DefaultRecord.sizeInBytes(0, 0L,
                key == null ? null : ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value), hs);
    }

    /**
     * Whether a record could be larger than {@code limit} as a batch of one: a bound that
     * needs no allocation (a record's own framing, varints included, is under 32 bytes, each
     * header's under 10), so the exact size is only worked out for records near the limit.
     */
    static boolean maySurpass(byte[] key, byte[] value, List<Header> headers, int limit) {
        long bound = DefaultRecordBatch.RECORD_BATCH_OVERHEAD + 32L + (key == null ? 0 : key.length)
                + (value == null ? 0 : value.length);
        if (headers != null) {
            for (Header h : headers) {
                bound += 10L + h.key().length() * 3L + (h.value() == null ? 0 : h.value().length);
            }
        }
        return bound > limit;
    }

    // The columns the writer reads, by name: those of Spark's Kafka source (with includeHeaders).
    static final String[] COLUMNS = {"topic", "partition", "offset", "key", "value", "timestamp", "headers"};
    static final int TOPIC = 0, PARTITION = 1, OFFSET = 2, KEY = 3, VALUE = 4, TIMESTAMP = 5, HEADERS = 6;

    /** Where each of {@link #COLUMNS} is in the query's rows, found by name in its schema. */
    static int[] columnsOf(StructType schema) {
        int[] at = new int[COLUMNS.length];
        for (int i = 0; i < COLUMNS.length; i++) {
            at[i] = schema.fieldIndex(COLUMNS[i]);
        }
        return at;
    }

    /**
     * A record's timestamp as Kafka has it, in epoch milliseconds. The row holds Spark's
     * internal timestamp, microseconds since the epoch (UTC, no time zone, no calendar
     * rebasing), which Spark's Kafka source made from Kafka's milliseconds: the division is
     * exact, and floors for the records before 1970 (-1, "no timestamp", included).
     */
    static long epochMillis(InternalRow row, int at) {
        return Math.floorDiv(row.getLong(at), 1000L);
    }

    /** A binary column's bytes (a copy out of the row), or null. */
    static byte[] bytesOrNull(InternalRow row, int at) {
        return row.isNullAt(at) ? null : row.getBinary(at);
    }

    /** The headers column (an array of struct&lt;key: string, value: binary&gt;), in order, or null. */
    static List<Header> headersOf(InternalRow row, int at) {
        if (row.isNullAt(at)) return null;
        ArrayData hs = row.getArray(at);
        int n = hs.numElements();
        List<Header> headers = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            InternalRow h = hs.getStruct(i, 2);
            headers.add(new RecordHeader(h.getUTF8String(0).toString(), bytesOrNull(h, 1)));
        }
        return headers;
    }

    /**
     * One record. The row is Spark's own UnsafeRow, as the Kafka source made it: the foreach
     * sink hands a {@code PythonForeachWriter} its rows unconverted (see the class comment).
     */
    @Override
    public void process(UnsafeRow row) {
        String permanent = PERMANENT.get(flow);
        if (permanent != null) throw new IllegalStateException(permanent);
        String err = failure.get();
        if (err != null) throw new IllegalStateException(err);
        int[] c = columns;
        if (c == null) c = columns = columnsOf(schema);
        UTF8String topicBytes = row.getUTF8String(c[TOPIC]);
        if (!topicBytes.equals(lastTopicBytes)) {
            String topic = topicBytes.toString();
            String target = topicMap.get(topic);
            if (target == null) {
                throw new IllegalStateException(ERROR_MARKER + ": flow " + flow + ": no target topic known for source topic "
                        + topic + " (the query's topic list changed without a restart)");
            }
            lastTopicBytes = topicBytes.clone(); // the row's bytes are reused for the next row
            lastTopic = topic;
            lastTarget = target;
            lastPartition = -1;
        }
        final String topic = lastTopic;
        int partition = row.getInt(c[PARTITION]);
        if (partition != lastPartition) {
            lastState = stateFor(topic, partition);
            lastPartition = partition;
        }
        final PartitionState state = lastState;
        final long offset = row.getLong(c[OFFSET]);
        byte[] key = bytesOrNull(row, c[KEY]);
        byte[] value = bytesOrNull(row, c[VALUE]);
        final long timestamp = epochMillis(row, c[TIMESTAMP]);
        List<Header> headers = headersOf(row, c[HEADERS]);
        final String target = lastTarget;
        final long size = (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
        Integer limit = maxMessageBytes.get(target);
        if (limit != null && uncompressed && maySurpass(key, value, headers, limit)) {
            int asBatch = sizeAsBatch(key, value, headers);
            if (asBatch > limit) {
                String message = ERROR_MARKER + ": cluster " + targetCluster + " rejected a record: "
                        + "org.apache.kafka.common.errors.RecordTooLargeException: it is " + asBatch
                        + " bytes as a batch of one, more than max.message.bytes = " + limit + " of target topic "
                        + target + " (source topic " + topic + " partition " + partition + " offset " + offset
                        + " -> target topic " + target + " partition " + partition + ")";
                PERMANENT.putIfAbsent(flow, message);
                throw new IllegalStateException(message);
            }
        }
        outstanding.incrementAndGet();
        try {
            producer.send(new ProducerRecord<>(target, partition, timestamp, key, value, headers), (md, e) -> {
                try {
                    if (e != null) {
                        String message = ERROR_MARKER + ": cluster " + targetCluster
                                + " rejected a record: " + e + " (source topic " + topic + " partition " + partition
                                + " offset " + offset + " -> target topic " + target + " partition " + partition + ")";
                        failure.compareAndSet(null, message);
                        state.failed(offset);
                        if (isPermanent(e)) PERMANENT.putIfAbsent(flow, message);
                    } else {
                        state.delivered(offset, md.offset());
                        long latency = System.currentTimeMillis() - timestamp;
                        synchronized (counters) {
                            counters[0]++;
                            counters[1] += size;
                            if (latency > counters[3]) counters[3] = latency;
                        }
                    }
                } finally {
                    outstanding.decrementAndGet();
                }
            });
        } catch (RuntimeException e) {
            outstanding.decrementAndGet();
            String message = ERROR_MARKER + ": cluster " + targetCluster + " topic " + target
                    + " partition " + partition + ": the record at source offset " + offset + " of " + topic
                    + " was not written: " + e;
            if (isPermanent(e)) PERMANENT.putIfAbsent(flow, message);
            throw new IllegalStateException(message, e);
        }
    }

    @Override
    public void close(Throwable errorOrNull) {
        if (producer == null) return;
        producer.flush();
        if (syncsProducer != null) {
            for (PartitionState s : STATES.values()) {
                if (s.syncs == syncsProducer) s.flushPending();
            }
            syncsProducer.flush();
            for (PartitionState s : STATES.values()) {
                String f = s.failure;
                if (f != null && s.syncs == syncsProducer) {
                    s.failure = null;
                    throw new IllegalStateException(ERROR_MARKER + ": flow " + flow + ": " + f);
                }
            }
        }
        String err = failure.get();
        if (err != null) throw new IllegalStateException(err);
        if (errorOrNull == null && outstanding.get() != 0) {
            throw new IllegalStateException(ERROR_MARKER + ": flow " + flow + ": " + outstanding.get()
                    + " records still unacknowledged after flush");
        }
    }
}
