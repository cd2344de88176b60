// Channel ping-pong, peer of the ping_pong group in benches/sync.rs: one
// goroutine sends a counter, the other sends it back plus one, over two
// channels of capacity <cap> (0: rendezvous). Prints the median over <reps>
// runs of ns per round trip.
//
// Usage: ping_pong <workers> <cap> <rounds> <reps>
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"
)

func arg(i int, def int, min int) int {
	if len(os.Args) > i {
		v, err := strconv.Atoi(os.Args[i])
		if err != nil || v < min {
			fmt.Fprintf(os.Stderr, "argument %d (%q) must be an integer >= %d\n", i, os.Args[i], min)
			os.Exit(2)
		}
		return v
	}
	return def
}

func main() {
	workers, capacity, n, reps := arg(1, 1, 1), arg(2, 0, 0), arg(3, 200000, 1), arg(4, 7, 1)
	runtime.GOMAXPROCS(workers)
	var res []float64
	for r := 0; r < reps; r++ {
		c1 := make(chan int, capacity)
		c2 := make(chan int, capacity)
		done := make(chan struct{})
		go func() {
			for v := range c1 {
				c2 <- v + 1
			}
			close(done)
		}()
		v := 0
		t0 := time.Now()
		for i := 0; i < n; i++ {
			c1 <- v
			v = <-c2
		}
		e := time.Since(t0)
		close(c1)
		<-done
		if v != n {
			fmt.Fprintf(os.Stderr, "ping-pong lost messages: %d != %d\n", v, n)
			os.Exit(1)
		}
		res = append(res, float64(e.Nanoseconds())/float64(n))
	}
	sort.Float64s(res)
	fmt.Printf("go ping_pong_cap%d %dw %.1f ns\n", capacity, workers, res[len(res)/2])
}
