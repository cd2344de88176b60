#!/usr/bin/env bash
# numa-vm.sh - run one program on a real multi-node NUMA Linux kernel: a
# throw-away QEMU guest with N nodes, booted from an initramfs.
#
#   scripts/numa-vm.sh [OPTIONS] PROGRAM [ARGS...]
#   scripts/numa-vm.sh --setup     install and fetch what the guest needs, run nothing
#   scripts/numa-vm.sh --check     say what is missing (install nothing); 0 when ready
#
# Options:
#   --nodes N            NUMA nodes, one CPU each (default 4)
#   --mem-per-node MIB   guest memory per node (default 256)
#   --env NAME=VALUE     environment variable for PROGRAM (repeatable)
#   --timeout SECS       stop the guest after SECS (default 600)
#   --verbose            print the guest's kernel console afterwards
#
# The guest:
# - N nodes of one CPU and MIB MiB each. The firmware's distance table (ACPI
#   SLIT) says 10 on the diagonal, 20 between neighbours (|i - j| = 1) and 30
#   otherwise; tests/numa_vm.rs checks exactly this pattern.
# - Debian's kernel: the package linux-image-amd64 depends on, fetched with
#   `apt-get download` into the cache directory and unpacked with dpkg-deb
#   (no other download). The ELF image inside the bzImage is booted directly
#   (PVH entry) when it can be extracted, which skips the guest's own
#   decompression (several seconds without KVM).
# - An initramfs of busybox (static), PROGRAM and the shared libraries it
#   links (as ldd lists them, e.g. libhwloc, libudev, libc).
# PROGRAM runs as root in /prog with stdin from /dev/null. Its stdout and
# stderr come back on this script's stdout and stderr (each over its own
# serial port) and its exit status is this script's.
#
# The guest runs under software emulation unless /dev/kvm is usable (an
# Intel or AMD KVM module): it shows what the kernel reports (nodes,
# distances, CPUs, affinity), never NUMA performance. Do not time anything
# in it. Each guest CPU costs about one host core while busy.
#
# Needs, on Debian or Ubuntu: qemu-system-x86 busybox-static xz-utils
# (installed with apt-get on first use when run as root or with password-less
# sudo; otherwise the script stops and prints the apt-get line to run).
# Cache: $NUMAFIBER_VM_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/numafiber-vm.
#
# Exit status: PROGRAM's; 124 when the guest timed out; 125 when the guest
# could not run (the message says why and what to do).
set -euo pipefail

NODES=4
MEM=256
TIMEOUT=600
VERBOSE=0
MODE=run
ENVS=()
CACHE=${NUMAFIBER_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numafiber-vm}

fail() { echo "numa-vm: $*" >&2; exit 125; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
        --nodes) NODES=${2:-}; shift 2 ;;
        --mem-per-node) MEM=${2:-}; shift 2 ;;
        --env) ENVS+=("${2:-}"); shift 2 ;;
        --timeout) TIMEOUT=${2:-}; shift 2 ;;
        --verbose) VERBOSE=1; shift ;;
        --setup) MODE=setup; shift ;;
        --check) MODE=check; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) fail "unknown option $1 (see --help)" ;;
        *) break ;;
    esac
done
is_count() { [[ $1 =~ ^[1-9][0-9]{0,3}$ ]]; }
is_count "$NODES" && [ "$NODES" -le 64 ] || fail "--nodes must be 1..64, got '$NODES'"
is_count "$MEM" && [ "$MEM" -ge 64 ] || fail "--mem-per-node must be 64..9999 (MiB), got '$MEM'"
is_count "$TIMEOUT" || fail "--timeout must be a positive number of seconds, got '$TIMEOUT'"
for e in ${ENVS[@]+"${ENVS[@]}"}; do
    [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || fail "--env wants NAME=VALUE, got '$e'"
done

# ------------------------------------------------------------ host packages
static_busybox() { # a busybox that needs no shared library, or nothing
    local b
    for b in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null || true)"; do
        [ -n "$b" ] && [ -x "$b" ] || continue
        if ! ldd "$b" >/dev/null 2>&1; then echo "$b"; return 0; fi
    done
    return 1
}
missing_packages() {
    local m=()
    command -v qemu-system-x86_64 >/dev/null 2>&1 || m+=(qemu-system-x86)
    static_busybox >/dev/null || m+=(busybox-static)
    command -v xz >/dev/null 2>&1 || m+=(xz-utils)
    echo "${m[*]:-}"
}
as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 1
    fi
}
install_packages() {
    local need
    need=$(missing_packages)
    [ -z "$need" ] && return 0
    echo "numa-vm: installing $need (apt-get) ..." >&2
    # shellcheck disable=SC2086 # a list of package names
    if ! { as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            as_root apt-get install -y -qq --no-install-recommends $need; } >"$CACHE/apt.log" 2>&1; then
        tail -n 5 "$CACHE/apt.log" >&2
        fail "could not install $need; as root run: apt-get update && apt-get install -y --no-install-recommends $need"
    fi
    need=$(missing_packages)
    [ -z "$need" ] || fail "still missing after apt-get: $need"
}

# ------------------------------------------------------------ kernel
# The kernel package linux-image-amd64 points to, e.g. linux-image-6.1.0-28-amd64.
kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1
}
# Extract the ELF kernel from a bzImage: the setup header gives the number of
# setup sectors (byte 0x1f1) and the compressed payload's offset (0x248,
# relative to the end of the setup code); Debian compresses it with xz.
extract_elf() { # bzImage out
    local img=$1 out=$2 sects off
    u8() { od -An -tu1 -j "$1" -N 1 "$img" | tr -d ' '; }
    u32() { od -An -tu4 -j "$1" -N 4 "$img" | tr -d ' '; }
    sects=$(u8 $((0x1f1))); [ "$sects" = 0 ] && sects=4
    off=$(( (sects + 1) * 512 + $(u32 $((0x248))) ))
    # (the payload ends with the image size in 4 bytes: decode one stream)
    xz -dc --single-stream <(tail -c +$((off + 1)) "$img") >"$out.tmp" 2>/dev/null || { rm -f "$out.tmp"; return 1; }
    [ "$(head -c 4 "$out.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || { rm -f "$out.tmp"; return 1; }
    mv "$out.tmp" "$out"
}
fetch_kernel() {
    [ -f "$CACHE/vmlinuz" ] && return 0
    local pkg tmp
    pkg=$(kernel_package)
    if [ -z "$pkg" ]; then
        as_root apt-get update -qq >/dev/null 2>&1 || true
        pkg=$(kernel_package)
    fi
    [ -n "$pkg" ] || fail "apt-cache does not know linux-image-amd64 (as root run: apt-get update)"
    echo "numa-vm: fetching the kernel ($pkg) with apt-get download ..." >&2
    tmp=$(mktemp -d "$CACHE/fetch.XXXXXX")
    chmod 755 "$tmp" # apt's download sandbox user must be able to write here
    (cd "$tmp" && apt-get download -q "$pkg") >"$CACHE/apt.log" 2>&1 ||
        { tail -n 5 "$CACHE/apt.log" >&2; rm -rf "$tmp"; fail "apt-get download $pkg failed"; }
    dpkg-deb -x "$tmp"/*.deb "$tmp/root"
    local vmlinuz config
    vmlinuz=$(find "$tmp/root/boot" -name 'vmlinuz-*' | head -n 1)
    config=$(find "$tmp/root/boot" -name 'config-*' | head -n 1)
    [ -n "$vmlinuz" ] || { rm -rf "$tmp"; fail "$pkg has no /boot/vmlinuz-*"; }
    if [ -n "$config" ] && ! grep -q '^CONFIG_NUMA=y' "$config"; then
        rm -rf "$tmp"; fail "$pkg is built without CONFIG_NUMA"
    fi
    echo "$pkg" >"$CACHE/kernel.package"
    extract_elf "$vmlinuz" "$CACHE/vmlinux" || rm -f "$CACHE/vmlinux"
    mv "$vmlinuz" "$CACHE/vmlinuz"
    rm -rf "$tmp"
}

mkdir -p "$CACHE" || fail "cannot create the cache directory $CACHE"
if [ "$MODE" = check ]; then
    need=$(missing_packages)
    ok=0
    [ -z "$need" ] || { echo "numa-vm: missing packages: $need (apt-get install -y --no-install-recommends $need)"; ok=1; }
    [ -f "$CACHE/vmlinuz" ] || { echo "numa-vm: no kernel in $CACHE yet (fetched on first run, or with --setup)"; ok=1; }
    [ $ok = 0 ] && echo "numa-vm: ready ($(cat "$CACHE/kernel.package" 2>/dev/null), cache $CACHE)"
    exit $ok
fi
install_packages
fetch_kernel
[ "$MODE" = setup ] && { echo "numa-vm: ready ($(cat "$CACHE/kernel.package"), cache $CACHE)" >&2; exit 0; }

[ $# -ge 1 ] || fail "no PROGRAM given (see --help)"
PROG=$1; shift
[ -f "$PROG" ] && [ -x "$PROG" ] || fail "$PROG is not an executable file"

# ------------------------------------------------------------ initramfs
WORK=$(mktemp -d "$CACHE/run.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
R=$WORK/initramfs
mkdir -p "$R"/{bin,dev,proc,sys,tmp,prog,root}
BUSYBOX=$(static_busybox)
cp "$BUSYBOX" "$R/bin/busybox"
put() { # host file -> same path in the guest, with the libraries it links
    local f=$1 dst=$2 lib
    mkdir -p "$R$(dirname "$dst")"
    cp -L "$f" "$R$dst"
    # (ldd fails on a static program or a script: nothing to add then)
    { ldd "$f" 2>/dev/null || true; } | awk '/=> \// { print $3 } /^[ \t]*\// { print $1 }' |
        while read -r lib; do
            if [ ! -e "$R$lib" ]; then
                mkdir -p "$R$(dirname "$lib")"
                cp -L "$lib" "$R$lib"
            fi
        done
}
GPROG=/prog/$(basename "$PROG")
put "$PROG" "$GPROG"

quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # for the guest's sh
CMDLINE=$(quote "$GPROG")
for a in "$@"; do CMDLINE+=" $(quote "$a")"; done
ENVLINE=""
for e in ${ENVS[@]+"${ENVS[@]}"}; do ENVLINE+=" $(quote "$e")"; done

# ttyS0: kernel console; ttyS1: stdout; ttyS2: stderr; ttyS3: exit status.
cat >"$R/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
for t in 1 2 3; do stty -F /dev/ttyS\$t raw -echo; done
cd /prog
env$ENVLINE $CMDLINE </dev/null >/dev/ttyS1 2>/dev/ttyS2
echo "status \$?" >/dev/ttyS3
sync
poweroff -f
EOF
chmod 755 "$R/init"
(cd "$R" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) >"$WORK/initramfs.cpio" ||
    fail "could not pack the initramfs"

# ------------------------------------------------------------ QEMU
ACCEL=tcg CPU=max
if [ -r /dev/kvm ] && [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
    ACCEL=kvm CPU=host
fi
KERNEL=$CACHE/vmlinuz
[ -f "$CACHE/vmlinux" ] && KERNEL=$CACHE/vmlinux
TOPO=()
for ((i = 0; i < NODES; i++)); do
    TOPO+=(-object "memory-backend-ram,id=mem$i,size=${MEM}M" -numa "node,nodeid=$i,cpus=$i,memdev=mem$i")
done
for ((i = 0; i < NODES; i++)); do
    for ((j = 0; j < NODES; j++)); do
        [ $i = $j ] && continue
        d=30; [ $((i - j)) = 1 ] || [ $((j - i)) = 1 ] && d=20
        TOPO+=(-numa "dist,src=$i,dst=$j,val=$d")
    done
done
: >"$WORK/console"; : >"$WORK/stdout"; : >"$WORK/stderr"; : >"$WORK/status"
set +e
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -machine pc -accel "$ACCEL" -cpu "$CPU" -smp "$NODES,sockets=$NODES,cores=1,threads=1" \
    -m "$((NODES * MEM))M" "${TOPO[@]}" \
    -nodefaults -no-reboot -display none -monitor none \
    -kernel "$KERNEL" -initrd "$WORK/initramfs.cpio" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off" \
    -serial "file:$WORK/console" -serial "file:$WORK/stdout" \
    -serial "file:$WORK/stderr" -serial "file:$WORK/status" \
    </dev/null >"$WORK/qemu.log" 2>&1
qrc=$?
set -e
cat "$WORK/stdout"
cat "$WORK/stderr" >&2
if [ $VERBOSE = 1 ]; then
    echo "---- guest console ($ACCEL, $(basename "$KERNEL"), $(cat "$CACHE/kernel.package")) ----" >&2
    cat "$WORK/console" "$WORK/qemu.log" >&2
fi
rc=$(sed -n 's/^status \([0-9]*\).*/\1/p' "$WORK/status" | head -n 1)
[ -n "$rc" ] && exit "$rc"
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
    echo "numa-vm: the guest did not finish within $TIMEOUT s (--timeout); the console's last lines:" >&2
    tail -n 15 "$WORK/console" >&2
    exit 124
fi
echo "numa-vm: the guest ended without an exit status (qemu exit $qrc); last lines:" >&2
tail -n 15 "$WORK/qemu.log" "$WORK/console" >&2
exit 125
