package sparkmirror;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * Writes a checkpoint entry the way Spark's streaming logs do, through the checkpoint file
 * manager class args[0], under the directory args[1]: {@code mkdirs}, {@code createAtomic},
 * write, close. With args[2] = "modes" it also creates a directory and files with explicit
 * modes through {@link NioLocalFileSystem}. Prints each file's mode as the OS sees it, the
 * entry's content, whether its {@code .crc} exists, what a write under a regular file throws
 * and the entries left in the log's directory, one line each.
 */
public class FileSystemHarness {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.set("fs.permissions.umask-mode", "022");
        Path dir = new Path("file://" + args[1]);
        CheckpointFileManager manager = (CheckpointFileManager) Class.forName(args[0])
                .getConstructor(Path.class, Configuration.class).newInstance(dir, conf);
        System.out.println("class " + manager.getClass().getName());
        Path offsets = new Path(dir, "offsets");
        manager.mkdirs(offsets);
        Path entry = new Path(offsets, "0");
        FSDataOutputStream out = manager.createAtomic(entry, false);
        out.write("v1\n{\"a\":1}".getBytes("UTF-8"));
        out.close();
        String[] names = {"offsets/0"};
        if (args.length > 2 && args[2].equals("modes")) {
            NioLocalFileSystem fs = new NioLocalFileSystem();
            fs.initialize(dir.toUri(), conf);
            fs.mkdirs(new Path(dir, "private"), new FsPermission((short) 0750));
            try (FSDataOutputStream o = fs.create(new Path(dir, "other"), new FsPermission((short) 0640), true, 4096,
                    (short) 1, 1 << 20, null)) {
                o.write('x');
            }
            Path exec = new Path(dir, "exec");
            fs.create(exec, true).close();
            fs.setPermission(exec, new FsPermission((short) 0711));
            names = new String[] {"offsets/0", "private", "other", "exec"};
        }
        for (String name : names) {
            java.nio.file.Path p = Paths.get(args[1], name);
            System.out.println(name + " " + PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
        }
        try (java.io.InputStream in = manager.open(entry)) {
            System.out.println("content " + new String(in.readAllBytes(), "UTF-8").replace('\n', '|'));
        }
        System.out.println("crc " + Files.exists(Paths.get(args[1], "offsets", ".0.crc")));
        Path blocked = new Path(dir, "blocked");
        manager.createAtomic(blocked, false).close();
        try {
            manager.createAtomic(new Path(blocked, "0"), false).close(); // its parent is a file
            System.out.println("failure none");
        } catch (Throwable e) {
            System.out.println("failure " + (e instanceof java.io.IOException ? "IOException" : e.getClass().getName()));
        }
        try (java.util.stream.Stream<java.nio.file.Path> left = Files.list(Paths.get(args[1], "offsets"))) {
            System.out.println("files " + left.map(p -> p.getFileName().toString()).sorted()
                    .collect(java.util.stream.Collectors.joining(",")));
        }
    }
}
