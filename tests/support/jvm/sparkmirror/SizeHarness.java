package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;

/**
 * For records described on stdin ("KEYLEN VALUELEN H1NAMELEN:H1VALUELEN ..." per line, -1 for
 * null), prints the writer's size check and the size Kafka's own record builder gives the
 * same record as an uncompressed batch of one (what the broker compares with
 * max.message.bytes), as "CHECK WIRE BOUND": BOUND is 1 when the writer's cheap pre-check
 * says a record of that size could surpass a limit of WIRE - 1 (it must: the exact check is
 * skipped when it says no).
 */
public class SizeHarness {
    private static byte[] bytes(int n) {
        return n < 0 ? null : new byte[n];
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ");
            if (f.length < 2) continue;
            byte[] key = bytes(Integer.parseInt(f[0]));
            byte[] value = bytes(Integer.parseInt(f[1]));
            List<Header> headers = new ArrayList<>();
            for (int i = 2; i < f.length; i++) {
                String[] h = f[i].split(":");
                headers.add(new RecordHeader("h".repeat(Integer.parseInt(h[0])), bytes(Integer.parseInt(h[1]))));
            }
            Header[] hs = headers.toArray(new Header[0]);
            int wire = MemoryRecords.withRecords(Compression.NONE,
                    new SimpleRecord(1_700_000_000_000L, key, value, hs)).sizeInBytes();
            int check = MirrorForeachWriter.sizeAsBatch(key, value, headers.isEmpty() ? null : headers);
            List<Header> hl = headers.isEmpty() ? null : headers;
            int bound = MirrorForeachWriter.maySurpass(key, value, hl, wire - 1) ? 1 : 0;
            System.out.println(check + " " + wire + " " + bound);
        }
    }
}
