// fib(n) without a cutoff, one fiber per call (joined), peer of
// benches/fib.rs's fib30_no_cutoff. Prints the median ns per fib(n).
// Usage: fib <workers> <n> <reps>
#include "peer.hpp"

static long fib(long n) {
    if (n < 2) return n;
    long a = 0;
    boost::fibers::fiber f([&a, n] { a = fib(n - 1); });
    long b = fib(n - 2);
    f.join();
    return a + b;
}

int main(int argc, char** argv) {
    int workers = arg(argc, argv, 1, 2);
    long n = arg(argc, argv, 2, 30);
    int reps = arg(argc, argv, 3, 1);
    std::vector<double> res;
    with_workers(workers, [&] {
        for (int r = 0; r < reps; ++r) {
            double t0 = now_ns();
            long v = fib(n);
            res.push_back(now_ns() - t0);
            if (n == 30 && v != 832040) {
                std::fprintf(stderr, "fib(30) = %ld, want 832040\n", v);
                std::exit(1);
            }
        }
    });
    std::printf("boost fib%ld %dw %.1f ns\n", n, workers, median(res));
}
