#!/usr/bin/env bash
# peers-lib.sh - sourced by the bench scripts that measure numafiber against
# peers outside Rust (Go, Boost.Fiber). Each `need_*` function installs the
# peer's Debian package when it is missing (as root, or with sudo), and
# returns non-zero with a message on stderr when it cannot: the caller then
# skips that peer and says so, it never fails the whole bench. `median`
# summarises a column of rounds.
#
#   . scripts/peers-lib.sh
#   if need_go; then build_go_peer skynet "$OUT/skynet_go"; fi
#   if need_boost_fiber; then g++ -O2 ... -lboost_fiber -lboost_context; fi
#
# Peer programs live in benches/go/<name>/main.go and
# benches/boost/<name>.cpp, each in the same shape as the Rust bench
# it is compared with.

_peers_sudo() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi; }

_peers_apt() {
    DEBIAN_FRONTEND=noninteractive _peers_apt_update_once &&
    DEBIAN_FRONTEND=noninteractive _peers_sudo apt-get install -y -qq "$@" >/dev/null 2>&1
}

_peers_apt_update_once() {
    [ -n "${_PEERS_APT_UPDATED:-}" ] && return 0
    _peers_sudo apt-get update -qq >/dev/null 2>&1 || return 1
    _PEERS_APT_UPDATED=1
}

# Go toolchain (Debian's golang-go). GOMAXPROCS is the caller's to set.
need_go() {
    command -v go >/dev/null 2>&1 && return 0
    _peers_apt golang-go && command -v go >/dev/null 2>&1 && return 0
    echo "peers: Go is not installed and golang-go could not be installed: skipping Go" >&2
    return 1
}

# build_go_peer NAME OUT: build the Go peer benches/go/NAME (GOPATH mode, no
# module download) into the file OUT (absolute, or relative to the current
# directory: the repository's root in every script). Call from the
# repository's root after need_go succeeded; fails as `go build` does.
build_go_peer() {
    local out=$2
    case $out in /*) ;; *) out=$PWD/$out ;; esac
    (cd "benches/go/$1" && GO111MODULE=off GOFLAGS= go build -o "$out" .)
}

# Boost.Fiber headers and libraries (Debian's libboost-fiber-dev) and g++.
need_boost_fiber() {
    if [ -e /usr/include/boost/fiber/all.hpp ] && command -v g++ >/dev/null 2>&1; then return 0; fi
    _peers_apt libboost-fiber-dev libboost-context-dev g++ && [ -e /usr/include/boost/fiber/all.hpp ] && return 0
    echo "peers: Boost.Fiber is not installed and libboost-fiber-dev could not be installed: skipping Boost.Fiber" >&2
    return 1
}

# The median of the numbers on stdin, one a line ("-" for none; the mean of
# the two middle ones for an even count).
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
