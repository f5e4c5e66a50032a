#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian/Ubuntu machine, and nothing twice:
# Debian's chromium (browser tests, kiosk) and openssl (TLS tests), bun from the npm registry, node modules,
# Debian's protoc, gRPC Python plugin and python3-grpcio (the README's Python client and its test; about
# 7 MB to download), and Debian's nginx-light (the fleet tests' load balancer; our code runs its own
# instance in a temp dir, the package's system service is never used).
set -euo pipefail
cd "$(dirname "$0")/.."
export ONNXRUNTIME_NODE_INSTALL=skip DEBIAN_FRONTEND=noninteractive

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v openssl >/dev/null || need+=(openssl)
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v grpc_python_plugin >/dev/null || need+=(protobuf-compiler-grpc)
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null || need+=(python3-grpcio python3-protobuf)
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: apt-get install ${need[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian starts the package's own nginx on port 80 where systemd runs; nothing here uses it.
  if [[ " ${need[*]} " == *" nginx-light "* ]] && command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
    echo "setup: systemctl disable --now nginx (the package's server on port 80; the project runs its own)"
    $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi

if ! command -v bun >/dev/null; then
  echo "setup: npm install -g bun@1.4.5"
  npm install -g --silent bun@1.4.5 >/dev/null
fi

bun install --frozen-lockfile
