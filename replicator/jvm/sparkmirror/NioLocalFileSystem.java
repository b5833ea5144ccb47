package sparkmirror;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's checksummed local file system, setting permissions through java.nio.
 *
 * <p>Without Hadoop's native library (pyspark ships none) {@link RawLocalFileSystem} sets the
 * permission of every file it creates by running a {@code chmod} child process. A streaming
 * checkpoint writes two such files (and their {@code .crc} files) at every batch boundary,
 * while no task reads. The same mode set with {@link Files#setPosixFilePermissions} is a system
 * call. Modes java.nio cannot express (setuid, setgid, sticky) and non-POSIX file systems go
 * to Hadoop's own code. {@link LocalCheckpointFileManager} creates checkpoint files with it;
 * it is not Spark's file system for anything else.
 */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new Raw());
    }

    public static class Raw extends RawLocalFileSystem {
        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            short mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission);
                return;
            }
            File file = pathToFile(p);
            try {
                Files.setPosixFilePermissions(file.toPath(), toPosix(mode));
            } catch (UnsupportedOperationException e) {
                super.setPermission(p, permission);
            }
        }

        static Set<PosixFilePermission> toPosix(int mode) {
            Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
            PosixFilePermission[] order = {
                PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE,
                PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
                PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE,
            };
            for (int i = 0; i < 9; i++) {
                if ((mode & (0400 >> i)) != 0) out.add(order[i]);
            }
            return out;
        }
    }
}
