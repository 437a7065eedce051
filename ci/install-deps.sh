#!/usr/bin/env bash
# Installs the Debian packages the harness builds with. Idempotent; silent when all are present.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config git python3 python3-venv python3-pytest
  libgtest-dev librapidcheck-dev nlohmann-json3-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin ccache clang-format libssl-dev
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "INFO: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
