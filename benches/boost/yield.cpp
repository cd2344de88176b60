// Yield round trip, peer of benches/switch.rs: two fibers ping-ponging
// through boost::this_fiber::yield. Prints the median ns per yield.
// Usage: yield <workers> <yields> <reps>
#include "peer.hpp"

int main(int argc, char** argv) {
    int workers = arg(argc, argv, 1, 1);
    long n = arg(argc, argv, 2, 2000000);
    int reps = arg(argc, argv, 3, 7);
    std::vector<double> res;
    with_workers(workers, [&] {
        for (int r = 0; r < reps; ++r) {
            boost::fibers::fiber partner([n] {
                for (long i = 0; i < n / 2; ++i) boost::this_fiber::yield();
            });
            double t0 = now_ns();
            for (long i = 0; i < n - n / 2; ++i) boost::this_fiber::yield();
            double e = now_ns() - t0;
            partner.join();
            res.push_back(e / double(n - n / 2));
        }
    });
    std::printf("boost yield %dw %.1f ns\n", workers, median(res));
}
