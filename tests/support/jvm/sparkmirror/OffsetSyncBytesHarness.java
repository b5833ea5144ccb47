package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Encodes OffsetSync records with the real-time writer's own encoders, one per stdin line
 * ("TOPIC_HEX PARTITION UPSTREAM DOWNSTREAM", the topic's UTF-8 bytes in hex), and prints
 * "KEY_HEX VALUE_HEX" for each, so a test can compare them with sparkmirror.model.records.
 */
public class OffsetSyncBytesHarness {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            String[] f = line.trim().split(" ");
            String topic = new String(hex.parseHex(f[0]), StandardCharsets.UTF_8);
            byte[] key = MirrorForeachWriter.offsetSyncKey(topic, Integer.parseInt(f[1]));
            byte[] value = MirrorForeachWriter.offsetSyncValue(Long.parseLong(f[2]), Long.parseLong(f[3]));
            System.out.println(hex.formatHex(key) + " " + hex.formatHex(value));
        }
    }
}
