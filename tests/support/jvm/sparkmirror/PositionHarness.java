package sparkmirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Feeds one partition's delivery reports to the real-time writer's partition state from stdin
 * ("ok U" for a record the target acknowledged, "fail U" for one it did not) and prints, after
 * each, the offset before which every record is acknowledged: where a stopped query resumes.
 */
public class PositionHarness {
    public static void main(String[] args) throws Exception {
        MirrorForeachWriter.PartitionState state =
                new MirrorForeachWriter.PartitionState("t", 0, null, "syncs", 100, new long[4]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] parts = line.trim().split(" ");
            if (parts.length != 2) continue;
            long upstream = Long.parseLong(parts[1]);
            if (parts[0].equals("ok")) {
                state.delivered(upstream, upstream + 1000);
            } else {
                state.failed(upstream);
            }
            System.out.println(state.next());
        }
    }
}
