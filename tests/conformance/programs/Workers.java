// A small JVM program for the conformance corpus: a thread pool, a concurrent map, file I/O
// through NIO, a child process through ProcessBuilder, and a deterministic printout.
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

public class Workers {
    public static void main(String[] args) throws Exception {
        ConcurrentHashMap<Integer, String> sums = new ConcurrentHashMap<>();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        for (int i = 0; i < 16; i++) {
            final int n = i;
            pool.submit(() -> {
                try {
                    MessageDigest md = MessageDigest.getInstance("SHA-256");
                    byte[] h = Integer.toString(n).getBytes();
                    for (int j = 0; j < 20000; j++) h = md.digest(h);
                    Path f = Files.createTempFile(Path.of("."), "w" + n, ".bin");
                    Files.write(f, h);
                    sums.put(n, HexFormat.of().formatHex(Files.readAllBytes(f)).substring(0, 8));
                    Files.delete(f);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
        }
        pool.shutdown();
        if (!pool.awaitTermination(60, TimeUnit.SECONDS)) throw new IllegalStateException("pool hung");
        System.out.println(new TreeMap<>(sums));
        Process p = new ProcessBuilder(List.of("sh", "-c", "echo child $((6 * 7)); exit 3")).start();
        System.out.print(new String(p.getInputStream().readAllBytes()));
        System.out.println("child exit " + p.waitFor());
        System.exit(sums.size() == 16 ? 0 : 1);
    }
}
