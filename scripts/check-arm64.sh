#!/usr/bin/env bash
# Checks the product on arm64 Linux (the CPU of Jetson and Raspberry Pi boards) on an x86-64 Debian machine,
# by running the arm64 Bun under qemu-user with the project's own node_modules (onnxruntime-node ships its
# linux/arm64 binding in bin/napi-v6/linux/arm64). It shows that on arm64
#   (a) the demo pair decodes the same greedy ids as on x86-64: small_only, and joint with the trained
#       router against the shim (both real servers on loopback, routed tokens over gRPC);
#   (b) an int8 and a q4 pack made by `bun run models quantize` decode, and agree with x86-64 within the
#       tolerances of tests/quantize.test.ts (next-token agreement > 94%, perplexity within 1.5%);
#   (c) `bun run edge` starts and serves its page and the OpenAI API's /v1/models.
# The x86-64 figures it compares against are computed by the x86-64 Bun in the same run. Exits non-zero on
# any mismatch.
#
# What emulation cannot show: speed (qemu-user translates every instruction, so timings say nothing about a
# board; measure there with `bun run bench`), and the board's own CPU: onnxruntime picks its kernels from the
# CPU features it sees (dot-product and i8mm instructions for int8 and q4), and qemu's default `max` CPU has
# them all, as a Jetson Orin's Cortex-A78AE has dot-product but a Raspberry Pi 4's Cortex-A72 has neither.
# ARM64_CPU=cortex-a72 (any name `qemu-aarch64-static -cpu help` lists) runs the check as that CPU. GPUs
# (CUDA on a Jetson, the WebGPU provider) are not emulated at all.
#
# Usage: scripts/check-arm64.sh    (ARM64_CHECK_DIR: where the arm64 Bun and reports go; ARM64_CPU: qemu CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${ARM64_CHECK_DIR:-${TMPDIR:-/tmp}/edge-arm64-check}"
CPU="${ARM64_CPU:-max}"
mkdir -p "$WORK"
started=$(date +%s)
declare -a timings=()
phase_started=$started
phase() {
  local now
  now=$(date +%s)
  [ -n "${current:-}" ] && timings+=("$current: $((now - phase_started)) s")
  current="$1"
  phase_started=$now
  echo "== $1"
}

phase "Debian packages (qemu-user-static, arm64 libc, libstdc++, libgcc)"
need=()
for pkg in qemu-user-static libc6:arm64 libstdc++6:arm64 libgcc-s1:arm64; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "apt-get install ${need[*]}"
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

phase "the arm64 Bun from npm, the version this Bun is"
version=$(bun --version)
bun_arm64="$WORK/bun-$version/package/bin/bun"
if [ ! -x "$bun_arm64" ]; then
  (cd "$WORK" && npm pack --silent "@oven/bun-linux-aarch64@$version" >/dev/null)
  mkdir -p "$WORK/bun-$version"
  tar xzf "$WORK/oven-bun-linux-aarch64-$version.tgz" -C "$WORK/bun-$version"
fi
binding=node_modules/onnxruntime-node/bin/napi-v6/linux/arm64/onnxruntime_binding.node
[ -f "$binding" ] || { echo "error: $binding is missing: run bun install" >&2; exit 1; }
# qemu-user 7.2 (Debian 12) passes the host's x86-64 /proc/cpuinfo through to the arm64 program. onnxruntime's
# CPU detection (cpuinfo) reads it at load time for each core's MIDR, and on some hosts (an AMD EPYC Zen 5 here)
# dereferences NULL and kills the process before any code of ours runs. A real board, and qemu from 8.1 on, show
# an arm64 one, so each emulated run gets one in a private mount namespace: the processor count of this machine,
# the MIDR of the emulated CPU. The features onnxruntime uses come from the auxiliary vector, which qemu fills
# for the emulated CPU, not from this file.
midr_part() {
  case "$1" in
    cortex-a53) echo 0xd03 ;; cortex-a55) echo 0xd05 ;; cortex-a57) echo 0xd07 ;; cortex-a72) echo 0xd08 ;;
    cortex-a76) echo 0xd0b ;; cortex-a710) echo 0xd47 ;; neoverse-n1) echo 0xd0c ;; neoverse-n2) echo 0xd49 ;;
    neoverse-v1) echo 0xd40 ;; *) echo 0xd40 ;;  # max, and any other: a Neoverse V1 (dot product, i8mm, SVE)
  esac
}
arm64_cpuinfo="$WORK/cpuinfo-$CPU"
cpus=$(nproc)
for ((i = 0; i < cpus; i++)); do
  printf 'processor\t: %d\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n' "$i"
  printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: %s\nCPU revision\t: 1\n\n' "$(midr_part "$CPU")"
done >"$arm64_cpuinfo"
if unshare --mount -- sh -c 'mount --bind "$1" /proc/cpuinfo' sh "$arm64_cpuinfo" 2>/dev/null; then
  # exec all the way down, so that a caller's $! is qemu's own pid.
  arm64_exec() { exec unshare --mount -- sh -c 'mount --bind "$1" /proc/cpuinfo && shift && exec "$@"' sh "$arm64_cpuinfo" env QEMU_CPU="$CPU" qemu-aarch64-static -L / "$bun_arm64" "$@"; }
else
  echo "note: no private mount namespace here (unshare --mount needs root): the emulated programs see the host's /proc/cpuinfo"
  arm64_exec() { exec env QEMU_CPU="$CPU" qemu-aarch64-static -L / "$bun_arm64" "$@"; }
fi
arm64() { (arm64_exec "$@"); }
seen=$(arm64 -e 'console.log(`${process.arch} ${Bun.version}`)')
[ "$seen" = "arm64 $version" ] || { echo "error: the arm64 Bun reports '$seen'" >&2; exit 1; }
echo "arm64 Bun $version runs under qemu-aarch64-static -cpu $CPU"

phase "demo packs and the int8 and q4 packs (x86-64 Bun, bun run models)"
bun run --silent models demo >/dev/null
for dtype in int8 q4; do
  rm -rf "$WORK/packs/$dtype"
  bun run --silent models quantize --in models/stories260k --out "$WORK/packs/$dtype" --dtype "$dtype"
done

phase "the reference on x86-64"
bun scripts/arm64/platform-report.ts --quantized "$WORK/packs" --out "$WORK/report-x64.json"

phase "the same on arm64 under qemu (slow: emulated)"
arm64 scripts/arm64/platform-report.ts --quantized "$WORK/packs" --out "$WORK/report-arm64.json" 2> >(grep -v 'Unknown CPU vendor' >&2)

phase "bun run edge on arm64: the page and /v1/models"
edge_log="$WORK/edge-arm64.log"
# Through arm64_exec, which execs down to qemu, so that $! is qemu's own pid and the kill reaches the edge.
(arm64_exec src/edge/main.ts --host 127.0.0.1 --port 0 --grpc-port off --cloud none) >"$edge_log" 2>&1 &
edge_pid=$!
trap 'kill "$edge_pid" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 240); do
  url=$(sed -n 's/^edge page: //p' "$edge_log")
  [ -n "$url" ] && break
  kill -0 "$edge_pid" 2>/dev/null || break
  sleep 0.5
done
server_ok=true
if [ -z "$url" ]; then
  echo "FAIL  the arm64 edge did not start; its output:" && cat "$edge_log"
  server_ok=false
else
  page=$(curl -fsS "$url" || true)
  models=$(curl -fsS "${url}v1/models" || true)
  if [[ "$page" == *"<title>Edge token router</title>"* ]]; then echo "ok    page at $url"; else echo "FAIL  page at $url"; server_ok=false; fi
  if [[ "$models" == *'"object":"list"'* ]]; then echo "ok    /v1/models: $models"; else echo "FAIL  /v1/models: $models"; server_ok=false; fi
fi
kill -TERM "$edge_pid" 2>/dev/null || true
wait "$edge_pid" 2>/dev/null || true
trap - EXIT

phase "summary"
compare_ok=true
bun scripts/arm64/compare-reports.ts "$WORK/report-x64.json" "$WORK/report-arm64.json" || compare_ok=false
phase "done"
echo "time: $(($(date +%s) - started)) s in all"
printf '  %s\n' "${timings[@]}"
if $compare_ok && $server_ok; then
  echo "arm64 check passed (qemu CPU $CPU)"
else
  echo "arm64 check FAILED (qemu CPU $CPU)" >&2
  exit 1
fi
