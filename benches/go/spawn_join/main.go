// Spawn + join of an empty goroutine, one at a time, peer of
// benches/spawn_join.rs. Prints the median over <reps> runs of ns per
// spawn + join.
//
// Usage: spawn_join <workers> <iters> <reps>
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

func arg(i int, def int) int {
	if len(os.Args) > i {
		v, err := strconv.Atoi(os.Args[i])
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "argument %d (%q) must be a positive integer\n", i, os.Args[i])
			os.Exit(2)
		}
		return v
	}
	return def
}

var sink int

func main() {
	workers, n, reps := arg(1, 1), arg(2, 300000), arg(3, 7)
	runtime.GOMAXPROCS(workers)
	var res []float64
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			var wg sync.WaitGroup
			wg.Add(1)
			x := i
			go func() {
				sink = x
				wg.Done()
			}()
			wg.Wait()
		}
		res = append(res, float64(time.Since(t0).Nanoseconds())/float64(n))
	}
	sort.Float64s(res)
	fmt.Printf("go spawn_join %dw %.1f ns\n", workers, res[len(res)/2])
}
