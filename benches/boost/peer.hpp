// Shared helpers of the Boost.Fiber peer programs (benches/boost/*.cpp):
// argument parsing, medians, and running a body on <workers> threads that
// share Boost.Fiber's work_stealing scheduler (1 worker: the default
// round_robin scheduler on the main thread only).
#pragma once
#include <boost/fiber/all.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

inline long arg(int argc, char** argv, int i, long def, long min = 1) {
    if (argc <= i) return def;
    char* end = nullptr;
    long v = std::strtol(argv[i], &end, 10);
    if (*end != '\0' || v < min) {
        std::fprintf(stderr, "argument %d (\"%s\") must be an integer >= %ld\n", i, argv[i], min);
        std::exit(2);
    }
    return v;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

inline double now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Run `body` in the main thread's main fiber with `workers` threads in the
// scheduler (the helpers only run stolen fibers; idle ones sleep:
// work_stealing's `suspend = true`).
template <class F>
void with_workers(int workers, F body) {
    if (workers <= 1) {
        body();
        return;
    }
    boost::fibers::mutex mtx;
    boost::fibers::condition_variable_any cv;
    bool done = false;
    std::vector<std::thread> helpers;
    for (int i = 1; i < workers; ++i) {
        helpers.emplace_back([&] {
            boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(workers, true);
            std::unique_lock<boost::fibers::mutex> lk(mtx);
            cv.wait(lk, [&] { return done; });
        });
    }
    boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(workers, true);
    body();
    {
        std::unique_lock<boost::fibers::mutex> lk(mtx);
        done = true;
    }
    cv.notify_all();
    for (auto& t : helpers) t.join();
}
