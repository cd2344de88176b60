// wake_storm sleep in Go: N goroutines each sleep a fixed period in a loop
// (time.Sleep), so every tick the runtime's timers wake a batch of them.
// Measures wakes per second and the process CPU time per wake over a window
// after a 0.5 s warm-up (getrusage), like benches/examples/wake_storm.rs (kind sleep).
// Run with GOMAXPROCS=<workers>. Prints one line in the format
// scripts/bench-timers.sh parses:
//
//	wake_storm sleep go workers=W fibers=N period_ms=P wakes_per_s=X user_ns_per_wake=U sys_ns_per_wake=S
//
// Usage: timers FIBERS PERIOD_MS SECS
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Wake counts, sharded (one cache line pair each) so that counting is not
// what is measured.
type shard struct {
	n atomic.Uint64
	_ [120]byte
}

var counts [64]shard
var stop atomic.Bool

func total() uint64 {
	var t uint64
	for i := range counts {
		t += counts[i].n.Load()
	}
	return t
}

func cpu() (time.Duration, time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func arg(i int, what string) int {
	if len(os.Args) <= i {
		fmt.Fprintf(os.Stderr, "timers: %s missing\nusage: timers FIBERS PERIOD_MS SECS\n", what)
		os.Exit(2)
	}
	v, err := strconv.Atoi(os.Args[i])
	if err != nil || v <= 0 {
		fmt.Fprintf(os.Stderr, "timers: %s must be a positive integer, got %q\n", what, os.Args[i])
		os.Exit(2)
	}
	return v
}

func main() {
	fibers, period, secs := arg(1, "FIBERS"), arg(2, "PERIOD_MS"), arg(3, "SECS")
	d := time.Duration(period) * time.Millisecond
	var wg sync.WaitGroup
	for i := 0; i < fibers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for !stop.Load() {
				time.Sleep(d)
				counts[i%64].n.Add(1)
			}
		}(i)
	}
	time.Sleep(500 * time.Millisecond)
	n0, t0 := total(), time.Now()
	u0, s0 := cpu()
	time.Sleep(time.Duration(secs) * time.Second)
	n1, t1 := total(), time.Now()
	u1, s1 := cpu()
	stop.Store(true)
	wg.Wait()
	wakes := n1 - n0
	if wakes == 0 {
		wakes = 1
	}
	fmt.Printf("wake_storm sleep go workers=%d fibers=%d period_ms=%d wakes_per_s=%.0f user_ns_per_wake=%.0f sys_ns_per_wake=%.0f\n",
		runtime.GOMAXPROCS(0), fibers, period, float64(n1-n0)/t1.Sub(t0).Seconds(),
		float64(u1-u0)/float64(wakes), float64(s1-s0)/float64(wakes))
}
