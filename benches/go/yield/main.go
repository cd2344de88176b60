// Yield round trip, peer of benches/switch.rs: two goroutines ping-ponging
// through runtime.Gosched on GOMAXPROCS=<workers>. Prints the median over
// <reps> runs of ns per Gosched.
//
// Usage: yield <workers> <yields> <reps>
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

func main() {
	workers, n, reps := arg(1, 1), arg(2, 2000000), arg(3, 7)
	runtime.GOMAXPROCS(workers)
	var res []float64
	for r := 0; r < reps; r++ {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			for i := 0; i < n/2; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
		t0 := time.Now()
		for i := 0; i < n-n/2; i++ {
			runtime.Gosched()
		}
		e := time.Since(t0)
		wg.Wait()
		res = append(res, float64(e.Nanoseconds())/float64(n-n/2))
	}
	sort.Float64s(res)
	fmt.Printf("go yield %dw %.1f ns\n", workers, res[len(res)/2])
}
