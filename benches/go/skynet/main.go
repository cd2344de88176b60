// skynet in Go: a 10-ary tree of goroutines with 1,000,000 leaves (1,111,111
// goroutines); each inner goroutine starts its 10 children and sums what
// they send on its channel (the classic skynet shape). Run with
// GOMAXPROCS=<workers>. Prints one line per run and VmHWM (peak RSS) of the
// process at the end, in the format scripts/bench-skynet.sh parses:
//
//   skynet go workers=W leaves=N run=I ms=T sum=S
//   skynet go workers=W vmhwm_kib=K
//
// Usage: skynet [leaves] [runs]
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func skynet(c chan<- int64, num int64, size int64) {
	if size == 1 {
		c <- num
		return
	}
	sub := size / 10
	rc := make(chan int64, 10)
	for i := int64(0); i < 10; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

func vmhwm() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "0"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			return strings.Fields(s.Text())[1]
		}
	}
	return "0"
}

func main() {
	leaves := int64(1000000)
	runs := 5
	if len(os.Args) > 1 {
		leaves, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	if len(os.Args) > 2 {
		runs, _ = strconv.Atoi(os.Args[2])
	}
	w := runtime.GOMAXPROCS(0)
	want := leaves * (leaves - 1) / 2
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		c := make(chan int64, 1)
		go skynet(c, 0, leaves)
		sum := <-c
		ms := float64(time.Since(t0).Microseconds()) / 1000.0
		if sum != want {
			fmt.Fprintf(os.Stderr, "wrong sum %d, want %d\n", sum, want)
			os.Exit(1)
		}
		fmt.Printf("skynet go workers=%d leaves=%d run=%d ms=%.1f sum=%d\n", w, leaves, i, ms, sum)
	}
	fmt.Printf("skynet go workers=%d vmhwm_kib=%s\n", w, vmhwm())
}
