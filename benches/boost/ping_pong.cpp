// Channel ping-pong, peer of the ping_pong group in benches/sync.rs: the
// main fiber sends a counter, a partner sends it back plus one, over two
// channels of capacity <cap> (0: unbuffered_channel, a rendezvous; 1:
// buffered_channel(2), which holds capacity - 1 = 1 value). Prints the
// median ns per round trip.
// Usage: ping_pong <workers> <cap: 0|1> <rounds> <reps>
#include "peer.hpp"

template <class Chan>
double run(Chan& c1, Chan& c2, long n) {
    boost::fibers::fiber partner([&] {
        long v;
        while (c1.pop(v) == boost::fibers::channel_op_status::success) c2.push(v + 1);
    });
    long v = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; ++i) {
        c1.push(v);
        c2.pop(v);
    }
    double e = now_ns() - t0;
    c1.close();
    partner.join();
    if (v != n) {
        std::fprintf(stderr, "ping-pong lost messages: %ld != %ld\n", v, n);
        std::exit(1);
    }
    return e / double(n);
}

int main(int argc, char** argv) {
    int workers = arg(argc, argv, 1, 1);
    long cap = arg(argc, argv, 2, 0, 0);
    long n = arg(argc, argv, 3, 200000);
    int reps = arg(argc, argv, 4, 7);
    if (cap > 1) {
        std::fprintf(stderr, "cap must be 0 or 1\n");
        return 2;
    }
    std::vector<double> res;
    with_workers(workers, [&] {
        for (int r = 0; r < reps; ++r) {
            if (cap == 0) {
                boost::fibers::unbuffered_channel<long> c1, c2;
                res.push_back(run(c1, c2, n));
            } else {
                boost::fibers::buffered_channel<long> c1(2), c2(2);
                res.push_back(run(c1, c2, n));
            }
        }
    });
    std::printf("boost ping_pong_cap%ld %dw %.1f ns\n", cap, workers, median(res));
}
