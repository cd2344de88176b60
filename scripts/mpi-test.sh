#!/usr/bin/env bash
# mpi-test.sh - build and test numafiber-mpi (mpi/) under mpirun on 2 and 4
# ranks, and run its examples on 2 ranks.
#
#   scripts/mpi-test.sh
#
# Installs Debian's Open MPI and libclang (libopenmpi-dev openmpi-bin
# libclang-dev) when mpirun or mpicc is missing, as root or with sudo;
# without either it says so and exits 0 having run nothing (the core crate
# never needs MPI). The test binary (mpi/tests/mpirun.rs) re-executes itself
# as `mpirun -np N --oversubscribe` for N in NUMAFIBER_MPI_NP (default
# 2,4). Open MPI refuses root unless OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set; this script sets them.
# Exit status: 0 when the tests passed (or were skipped with a message).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            SUDO=sudo
        else
            echo "mpi-test: SKIPPED: Open MPI is not installed and this user cannot install it (run as root, or: apt-get install libopenmpi-dev openmpi-bin libclang-dev)"
            exit 0
        fi
    fi
    if ! command -v apt-get >/dev/null; then
        echo "mpi-test: SKIPPED: no apt-get to install Open MPI (install an MPI with MPI_THREAD_MULTIPLE, mpicc and libclang)"
        exit 0
    fi
    echo "mpi-test: installing Open MPI and libclang" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --version | head -n 1
# The tests (np 2 and 4, see above) and the doc examples (compiled; those
# that need no MPI job run).
cargo test --release -p numafiber-mpi
for ex in ping_pong halo; do
    cargo build --release -p numafiber-mpi --example "$ex"
    mpirun -np 2 --oversubscribe "target/release/examples/$ex"
done
echo "mpi-test: ok"
