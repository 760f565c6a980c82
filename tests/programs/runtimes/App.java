// A small JVM program for the runtimes corpus: parallel streams on the common ForkJoin pool,
// a thread pool, a child process, files, and an exit status of its own.
import java.nio.file.*;
import java.security.MessageDigest;
import java.util.*;
import java.util.concurrent.*;
import java.util.stream.*;

public class App {
    static String digest(int seed) throws Exception {
        byte[] h = Integer.toString(seed).getBytes();
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        for (int i = 0; i < 20000; i++) h = md.digest(h);
        return String.format("%02x%02x", h[0], h[1]);
    }

    public static void main(String[] args) throws Exception {
        long primes = IntStream.range(2, 200000).parallel()
            .filter(n -> IntStream.rangeClosed(2, (int) Math.sqrt(n)).noneMatch(d -> n % d == 0)).count();
        System.out.println("primes " + primes);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Future<String>> parts = new ArrayList<>();
        for (int i = 0; i < 6; i++) { final int s = i; parts.add(pool.submit(() -> digest(s))); }
        StringBuilder all = new StringBuilder();
        for (Future<String> f : parts) all.append(f.get()).append(' ');
        pool.shutdown();
        System.out.println("digests " + all.toString().trim());
        Process p = new ProcessBuilder("sh", "-c", "echo child; exit 4").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).trim();
        System.out.println(out + " " + p.waitFor());
        Path f = Files.writeString(Path.of("out.txt"), String.join("\n", Collections.nCopies(1000, "row")));
        System.out.println("lines " + Files.readAllLines(f).size());
        System.exit(3);
    }
}
