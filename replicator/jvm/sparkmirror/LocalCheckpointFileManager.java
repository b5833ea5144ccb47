package sparkmirror;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint file manager, creating a checkpoint's files on the local
 * file system through {@link NioLocalFileSystem}: the same files (temp file, then rename; a
 * {@code .crc} beside each), the same modes, and no {@code chmod} child process per file.
 * Directories are made the same way. Anything else (another scheme, the rename, reads,
 * listing) is Spark's own code.
 */
public class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
    private final NioLocalFileSystem local;

    public LocalCheckpointFileManager(Path path, Configuration conf) {
        super(path, conf);
        if ("file".equals(fs().getUri().getScheme())) {
            local = new NioLocalFileSystem();
            try {
                local.initialize(fs().getUri(), conf);
            } catch (IOException e) {
                throw rethrow(e);
            }
        } else {
            local = null;
        }
    }

    @Override
    public void mkdirs(Path path) {
        if (local == null) {
            super.mkdirs(path);
            return;
        }
        try {
            local.mkdirs(path, FsPermission.getDirDefault()); // what Spark's manager asks for
        } catch (IOException e) {
            throw rethrow(e);
        }
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        if (local == null) return super.createTempFile(path);
        try {
            return local.create(path, true);
        } catch (IOException e) {
            throw rethrow(e);
        }
    }

    /**
     * Throws {@code e} itself: the Scala methods overridden here declare no exceptions, and
     * their callers in Spark see the IOException Hadoop threw (as from Spark's own manager),
     * not a wrapper around it.
     */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException rethrow(Throwable e) throws E {
        throw (E) e;
    }
}
