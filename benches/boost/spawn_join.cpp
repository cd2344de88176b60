// Spawn + join of an empty fiber, one at a time, peer of
// benches/spawn_join.rs. Prints the median ns per spawn + join.
// Usage: spawn_join <workers> <iters> <reps>
#include "peer.hpp"

static volatile long sink;

int main(int argc, char** argv) {
    int workers = arg(argc, argv, 1, 1);
    long n = arg(argc, argv, 2, 300000);
    int reps = arg(argc, argv, 3, 7);
    std::vector<double> res;
    with_workers(workers, [&] {
        for (int r = 0; r < reps; ++r) {
            double t0 = now_ns();
            for (long i = 0; i < n; ++i) {
                boost::fibers::fiber f([i] { sink = i; });
                f.join();
            }
            res.push_back((now_ns() - t0) / double(n));
        }
    });
    std::printf("boost spawn_join %dw %.1f ns\n", workers, median(res));
}
