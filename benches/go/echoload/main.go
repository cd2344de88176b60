// Echo load generator for scripts/bench-io.sh: one goroutine per
// connection, each sending SIZE bytes and reading them back in a closed
// loop for DURATION seconds after every connection is open. Prints one line:
// requests/s, p50/p99 round-trip latency, and the per-connection fairness
// figure (the round trips of the 1st-percentile connection against the
// median connection's).
//
//	go run ./benches/go/echoload ADDR CONNS SECONDS [SIZE]
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Log-linear histogram of microseconds: 64 sub-buckets per power of two.
const sub = 64

func bucket(us int64) int {
	if us < sub {
		return int(us)
	}
	e := 0
	for v := us; v >= 2*sub; v >>= 1 {
		e++
	}
	return sub + e*sub + int((us>>uint(e))-sub)
}

func bucketValue(b int) int64 {
	if b < sub {
		return int64(b)
	}
	e := (b - sub) / sub
	m := int64((b-sub)%sub + sub)
	return m << uint(e)
}

const nBuckets = sub + 40*sub

func fail(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "echoload: "+f+"\n", a...)
	os.Exit(1)
}

func arg(i int, name string) int {
	if len(os.Args) <= i {
		fail("usage: echoload ADDR CONNS SECONDS [SIZE]")
	}
	n, err := strconv.Atoi(os.Args[i])
	if err != nil || n <= 0 {
		fail("%s must be a positive integer, got %q", name, os.Args[i])
	}
	return n
}

func main() {
	if len(os.Args) < 4 {
		fail("usage: echoload ADDR CONNS SECONDS [SIZE]")
	}
	addr := os.Args[1]
	conns := arg(2, "CONNS")
	secs := arg(3, "SECONDS")
	size := 64
	if len(os.Args) > 4 {
		size = arg(4, "SIZE")
	}
	cs := make([]net.Conn, conns)
	for i := range cs {
		var c net.Conn
		var err error
		for try := 0; try < 50; try++ {
			c, err = net.Dial("tcp", addr)
			if err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			fail("connection %d: %v", i, err)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		cs[i] = c
	}
	counts := make([]int64, conns)
	hists := make([][]int64, conns)
	var errs sync.Map
	var start sync.WaitGroup
	var done sync.WaitGroup
	start.Add(1)
	var deadline time.Time
	for i := range cs {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			c := cs[i]
			h := make([]int64, nBuckets)
			hists[i] = h
			out := bytes.Repeat([]byte{byte('a' + i%26)}, size)
			in := make([]byte, size)
			start.Wait()
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if _, err := c.Write(out); err != nil {
					errs.Store(i, err)
					return
				}
				if _, err := io.ReadFull(c, in); err != nil {
					errs.Store(i, err)
					return
				}
				us := time.Since(t0).Microseconds()
				b := bucket(us)
				if b >= nBuckets {
					b = nBuckets - 1
				}
				h[b]++
				counts[i]++
			}
		}(i)
	}
	t0 := time.Now()
	deadline = t0.Add(time.Duration(secs) * time.Second)
	start.Done()
	done.Wait()
	el := time.Since(t0).Seconds()
	for _, c := range cs {
		c.Close()
	}
	nerr := 0
	errs.Range(func(k, v interface{}) bool {
		if nerr == 0 {
			fmt.Fprintf(os.Stderr, "echoload: connection %v: %v\n", k, v)
		}
		nerr++
		return true
	})
	total := make([]int64, nBuckets)
	var n int64
	for i := range hists {
		for b, v := range hists[i] {
			total[b] += v
		}
		n += counts[i]
	}
	pct := func(p float64) int64 {
		want := int64(float64(n)*p + 0.5)
		if want < 1 {
			want = 1
		}
		var acc int64
		for b, v := range total {
			acc += v
			if acc >= want {
				return bucketValue(b)
			}
		}
		return bucketValue(nBuckets - 1)
	}
	sorted := append([]int64(nil), counts...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	med := sorted[len(sorted)/2]
	worst := sorted[len(sorted)/100]
	ratio := 0.0
	if med > 0 {
		ratio = float64(worst) / float64(med)
	}
	best := sorted[len(sorted)-1-len(sorted)/100]
	mean := float64(n) / float64(conns)
	fmt.Printf("echoload %d conns %.1f s: %.0f requests/s p50 %d us p99 %d us; conn round trips median %d worst1%% %d fairness %.2f; mean %.1f best1%% %d; errors %d\n",
		conns, el, float64(n)/el, pct(0.50), pct(0.99), med, worst, ratio, mean, best, nerr)
}
