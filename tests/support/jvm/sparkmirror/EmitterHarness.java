package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the real-time writer's per-partition offset-sync state with delivery reports read
 * from stdin ("U D" per line, "flush" for a batch end) and prints every sync it sent as
 * "U D", so a test can compare it with the Python OffsetSyncEmitter on the same input.
 * MockProducer stands in for the syncs producer: only the emission rule is under test.
 */
public class EmitterHarness {
    public static void main(String[] args) throws Exception {
        long lagMax = Long.parseLong(args[0]);
        MockProducer<byte[], byte[]> syncs = new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
        MirrorForeachWriter.PartitionState state =
                new MirrorForeachWriter.PartitionState("t", 0, syncs, "syncs", lagMax, new long[4]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            line = line.trim();
            if (line.isEmpty()) continue;
            if (line.equals("flush")) {
                state.flushPending();
                continue;
            }
            String[] parts = line.split(" ");
            state.delivered(Long.parseLong(parts[0]), Long.parseLong(parts[1]));
        }
        for (ProducerRecord<byte[], byte[]> r : syncs.history()) {
            ByteBuffer v = ByteBuffer.wrap(r.value());
            System.out.println(v.getLong() + " " + v.getLong());
        }
    }
}
