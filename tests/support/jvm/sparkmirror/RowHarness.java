package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.kafka010.KafkaRecordToRowConverter;

/**
 * Turns Kafka records into the rows a real-time query hands the writer, with Spark's own
 * code: the Kafka source's record-to-row converter (headers included), then the row
 * deserializer of a query over that schema. For each stdin line "TIMESTAMP_MS" it prints what
 * the writer reads from the row: "TOPIC PARTITION OFFSET KEY VALUE TIMESTAMP_MS HEADERS CLASS", the
 * headers as NAME=VALUE joined by commas, CLASS the timestamp column's class in the row. Argument "java8": rows as with
 * spark.sql.datetime.java8API.enabled.
 */
public class RowHarness {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("java8")) {
            SQLConf.get().setConfString("spark.sql.datetime.java8API.enabled", "true");
        }
        ExpressionEncoder<Row> enc = ExpressionEncoder.apply(KafkaRecordToRowConverter.kafkaSchema(true));
        ExpressionEncoder.Deserializer<Row> toRow =
                enc.resolveAndBind(enc.resolveAndBind$default$1(), enc.resolveAndBind$default$2()).createDeserializer();
        scala.Function1<ConsumerRecord<byte[], byte[]>, ?> toInternal =
                new KafkaRecordToRowConverter().toUnsafeRowWithHeadersProjector();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        long offset = 40;
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            long ts = Long.parseLong(line.trim());
            RecordHeaders headers = new RecordHeaders();
            headers.add("h1", "a".getBytes(StandardCharsets.UTF_8));
            headers.add("h2", null);
            ConsumerRecord<byte[], byte[]> rec = new ConsumerRecord<>("src.topic", 3, offset++, ts,
                    TimestampType.CREATE_TIME, 1, 5, "k".getBytes(StandardCharsets.UTF_8),
                    ("v" + ts).getBytes(StandardCharsets.UTF_8), headers, Optional.empty());
            Row row = toRow.apply((InternalRow) toInternal.apply(rec));
            int[] c = MirrorForeachWriter.columnsOf(row);
            StringBuilder hs = new StringBuilder();
            List<Row> hl = row.getList(c[MirrorForeachWriter.HEADERS]);
            for (Row h : hl) {
                if (hs.length() > 0) hs.append(',');
                hs.append(h.getString(0)).append('=').append(h.isNullAt(1) ? "null" : new String((byte[]) h.get(1), StandardCharsets.UTF_8));
            }
            System.out.println(row.getString(c[MirrorForeachWriter.TOPIC]) + " " + row.getInt(c[MirrorForeachWriter.PARTITION])
                    + " " + row.getLong(c[MirrorForeachWriter.OFFSET])
                    + " " + new String((byte[]) row.get(c[MirrorForeachWriter.KEY]), StandardCharsets.UTF_8)
                    + " " + new String((byte[]) row.get(c[MirrorForeachWriter.VALUE]), StandardCharsets.UTF_8)
                    + " " + MirrorForeachWriter.epochMillis(row.get(c[MirrorForeachWriter.TIMESTAMP])) + " " + hs
                    + " " + row.get(c[MirrorForeachWriter.TIMESTAMP]).getClass().getSimpleName());
        }
    }
}
