package sparkmirror;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@link MirrorForeachWriter#flushAll} with a producer whose flush returns and then with one
 * whose flush does not come back for a minute (as with records to an unreachable target):
 * prints, for each, the milliseconds flushAll took and what it returned.
 */
public class FlushHarness {
    public static void main(String[] args) throws Exception {
        MirrorForeachWriter.PRODUCERS.put("done", new MockProducer<>(true, null, new ByteArraySerializer(),
                new ByteArraySerializer()));
        report(MirrorForeachWriter.flushAll(2000));
        MirrorForeachWriter.PRODUCERS.put("stuck", new MockProducer<>(true, null, new ByteArraySerializer(),
                new ByteArraySerializer()) {
            @Override
            public synchronized void flush() {
                try {
                    Thread.sleep(60_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        report(MirrorForeachWriter.flushAll(500));
    }

    private static long started = System.nanoTime();

    private static void report(String result) {
        long now = System.nanoTime();
        System.out.println((now - started) / 1_000_000 + " " + result);
        started = now;
    }
}
