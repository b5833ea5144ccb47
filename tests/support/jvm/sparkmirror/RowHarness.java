package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.kafka010.KafkaRecordToRowConverter;

/**
 * Turns Kafka records into the rows a real-time query hands the writer, with Spark's own
 * code: the Kafka source's record-to-row converter, headers included, whose UnsafeRows the
 * foreach sink passes on as they are. For each stdin line "TIMESTAMP_MS KEY|null VALUE|null"
 * it prints what the writer reads from the row with its own helpers:
 * "TOPIC PARTITION OFFSET KEY VALUE TIMESTAMP_MS HEADERS", the headers as NAME=VALUE joined
 * by commas (an absent key or value printed as "null").
 */
public class RowHarness {
    public static void main(String[] args) throws Exception {
        int[] c = MirrorForeachWriter.columnsOf(KafkaRecordToRowConverter.kafkaSchema(true));
        scala.Function1<ConsumerRecord<byte[], byte[]>, UnsafeRow> toRow =
                new KafkaRecordToRowConverter().toUnsafeRowWithHeadersProjector();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long offset = 40;
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            String[] f = line.trim().split(" ");
            long ts = Long.parseLong(f[0]);
            RecordHeaders headers = new RecordHeaders();
            headers.add("h1", "a".getBytes(StandardCharsets.UTF_8));
            headers.add("h2", null);
            headers.add("h\u00e9", "\u00fc".getBytes(StandardCharsets.UTF_8));
            ConsumerRecord<byte[], byte[]> rec = new ConsumerRecord<>("src.topic", 3, offset++, ts,
                    TimestampType.CREATE_TIME, 1, 5, bytes(f[1]), bytes(f[2]), headers, Optional.empty());
            UnsafeRow row = toRow.apply(rec);
            StringBuilder hs = new StringBuilder();
            List<Header> hl = MirrorForeachWriter.headersOf(row, c[MirrorForeachWriter.HEADERS]);
            for (Header h : hl) {
                if (hs.length() > 0) hs.append(',');
                hs.append(h.key()).append('=').append(string(h.value()));
            }
            System.out.println(row.getUTF8String(c[MirrorForeachWriter.TOPIC]) + " " + row.getInt(c[MirrorForeachWriter.PARTITION])
                    + " " + row.getLong(c[MirrorForeachWriter.OFFSET])
                    + " " + string(MirrorForeachWriter.bytesOrNull(row, c[MirrorForeachWriter.KEY]))
                    + " " + string(MirrorForeachWriter.bytesOrNull(row, c[MirrorForeachWriter.VALUE]))
                    + " " + MirrorForeachWriter.epochMillis(row, c[MirrorForeachWriter.TIMESTAMP]) + " " + hs);
        }
    }

    private static byte[] bytes(String s) {
        return s.equals("null") ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    private static String string(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }
}
