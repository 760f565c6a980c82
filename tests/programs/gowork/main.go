// A Go program that exercises what Go's runtime does with the kernel: goroutines on several
// threads, signals for preemption, file I/O, a child process and a loopback HTTP round trip.
// It prints only values that do not depend on pids, addresses or times.
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	sums := make([]byte, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h := sha256.Sum256([]byte(fmt.Sprint(i)))
			for j := 0; j < 20000; j++ {
				h = sha256.Sum256(h[:])
			}
			sums[i] = h[0]
		}(i)
	}
	wg.Wait()
	fmt.Printf("goroutines %x\n", sums)

	dir, err := os.MkdirTemp("", "gowork")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("coreplane\n"), 0o600); err != nil {
		panic(err)
	}
	data, _ := os.ReadFile(name)
	fmt.Printf("file %q\n", data)

	out, err := exec.Command("/bin/echo", "child").Output()
	fmt.Printf("exec %q %v\n", out, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.URL.Path)
	}))
	resp, err := http.Get("http://" + ln.Addr().String() + "/x")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("http %d %q\n", resp.StatusCode, body)
}
