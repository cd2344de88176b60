// fib(n) without a cutoff, one goroutine per call, peer of
// benches/fib.rs's fib30_no_cutoff. Prints the median over <reps> runs in
// ns per whole fib(n).
//
// Usage: fib <workers> <n> <reps>
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

func fib(n int) int {
	if n < 2 {
		return n
	}
	var a int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		a = fib(n - 1)
		wg.Done()
	}()
	b := fib(n - 2)
	wg.Wait()
	return a + b
}

func main() {
	workers, n, reps := arg(1, 2), arg(2, 30), arg(3, 3)
	runtime.GOMAXPROCS(workers)
	var res []float64
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		v := fib(n)
		res = append(res, float64(time.Since(t0).Nanoseconds()))
		if n == 30 && v != 832040 {
			fmt.Fprintf(os.Stderr, "fib(30) = %d, want 832040\n", v)
			os.Exit(1)
		}
	}
	sort.Float64s(res)
	fmt.Printf("go fib%d %dw %.1f ns\n", n, workers, res[len(res)/2])
}
