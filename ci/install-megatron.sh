#!/usr/bin/env bash
# Installs the Python environment behind the Megatron adapter
# (harness/megatron/adapter/adapter.py): a virtual environment with torch and a pinned
# megatron-core, both from PyPI, pytest (the adapter's own tests, harness/megatron/adapter/tests/) and
# coverage.py (gate --coverage).
#
# Usage: ci/install-megatron.sh [--megatron-path DIR] [--force]
#
#   --megatron-path DIR  do not install megatron-core; the adapter is expected to be run
#                        with `--megatron-path DIR` itself (nothing global is recorded here).
#                        DIR must contain megatron/core/__init__.py.
#   --force              reinstall even when the marker says everything is present.
#
# Environment:
#   INTEROP_MEGATRON_VENV   venv location (default $HOME/.cache/interop-harness/megatron-venv)
#   INTEROP_TORCH_VERSION   torch version to install (default below)
#
# Idempotent: a marker file in the venv records what was installed; when it matches the
# request, the script prints the venv's python and returns at once. Progress goes to stderr;
# the last line on stdout is always the venv's python path.
#
# Notes on torch: every x86_64 Linux torch wheel on PyPI is a CUDA build whose
# libtorch_python.so links libtorch_cuda.so, which in turn links cuDNN, cuBLAS, NCCL, cuFFT,
# cuSPARSE(Lt), cuFile, NVSHMEM and the CUDA runtime. `pip install --no-deps torch` therefore
# fails at `import torch` (missing libcufile.so.0 etc.) and there is no cheaper CPU-usable
# torch on PyPI, so torch is installed with its normal dependencies (a 3 GB download; the venv is 5.4 GB on disk).
#
# Not installed on purpose: nvidia-resiliency-ext (Megatron's MCoreTensorAwareStateDict wants it).
# The newest wheel for CPython 3.12 on glibc 2.36 is 0.4.1, and with it `import megatron.core` of
# the CI snapshot fails (its dist_checkpointing asserts nvrx >= 0.6.0 by reading a __version__
# that 0.4.1 lacks: AttributeError). The adapter patches the one guard instead
# (docs/megatron-patches.md, tensor_aware_state_dict.HAVE_NVRX).
set -euo pipefail

MEGATRON_CORE_VERSION=0.19.2
TORCH_VERSION=${INTEROP_TORCH_VERSION:-2.15.0}
# coverage.py with the sys.monitoring core and patch=fork that gate --coverage uses (docs/coverage.md).
COVERAGE_VERSION=7.18.0
VENV=${INTEROP_MEGATRON_VENV:-$HOME/.cache/interop-harness/megatron-venv}
MARKER_NAME=interop-harness-installed.txt

megatron_path=""
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --megatron-path)
      [ $# -ge 2 ] || { echo "install-megatron: --megatron-path needs a directory" >&2; exit 2; }
      megatron_path=$2; shift 2 ;;
    --megatron-path=*) megatron_path=${1#--megatron-path=}; shift ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-megatron: unknown argument: $1" >&2; exit 2 ;;
  esac
done

log() { echo "install-megatron: $*" >&2; }

if [ -n "$megatron_path" ]; then
  if [ ! -f "$megatron_path/megatron/core/__init__.py" ]; then
    log "--megatron-path $megatron_path has no megatron/core/__init__.py"
    exit 2
  fi
fi

py="$VENV/bin/python"
marker="$VENV/$MARKER_NAME"

# What this request needs from the marker.
want_torch="torch=$TORCH_VERSION"
want_mcore="megatron-core=$MEGATRON_CORE_VERSION"

marker_satisfies() {
  [ -x "$py" ] && [ -f "$marker" ] || return 1
  grep -qx "$want_torch" "$marker" || return 1
  grep -q '^pytest=' "$marker" || return 1  # a venv from before pytest joined: install it, nothing else changes
  grep -qx "coverage=$COVERAGE_VERSION" "$marker" || return 1  # likewise coverage.py (gate --coverage)
  grep -qx 'cosmic-ray=8.7.0' "$marker" || return 1  # likewise cosmic-ray (mutate)
  if [ -z "$megatron_path" ]; then
    grep -qx "$want_mcore" "$marker" || return 1
  fi
  return 0
}

if [ "$force" = 0 ] && marker_satisfies; then
  echo "$py"
  exit 0
fi

# A python that really runs (pyenv shims exist for versions that are not selected).
find_python() {
  local cand
  for cand in python3.12 /root/.pyenv/versions/3.12*/bin/python3.12; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then
      command -v "$cand"
      return 0
    fi
  done
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import venv' >/dev/null 2>&1; then
    command -v python3
    return 0
  fi
  return 1
}

start=$(date +%s)

if [ ! -x "$py" ] || ! "$py" -c 'import sys' >/dev/null 2>&1; then
  base=$(find_python) || { log "no usable python3.12 or python3 with venv"; exit 1; }
  log "creating venv $VENV with $base ($("$base" --version 2>&1))"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$base" -m venv "$VENV"
  "$py" -m pip install -q --disable-pip-version-check --upgrade pip >&2
fi

pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pip_quiet=(-q --disable-pip-version-check)

log "installing torch==$TORCH_VERSION numpy packaging pytest coverage==$COVERAGE_VERSION (large CUDA wheels; several minutes)"
"$py" -m pip install "${pip_quiet[@]}" "torch==$TORCH_VERSION" numpy packaging pytest "coverage==$COVERAGE_VERSION" >&2
# mutate's operators (docs/guides/mutation-testing.md): cosmic-ray used as a library, pinned.
log "installing cosmic-ray==8.7.0"
"$py" -m pip install "${pip_quiet[@]}" "cosmic-ray==8.7.0" >&2

mcore_line="megatron-core=external"
if [ -z "$megatron_path" ]; then
  extra=()
  if "$py" -c 'import sys; sys.exit(0 if sys.version_info < (3, 12) else 1)'; then
    # megatron-core 0.19.2 declares Requires-Python >=3.12 and ships cp312 wheels only; on an
    # older python pip builds its sdist (a small C++ helper; needs g++), and the code runs.
    extra=(--ignore-requires-python)
  fi
  log "installing megatron-core==$MEGATRON_CORE_VERSION"
  "$py" -m pip install "${pip_quiet[@]}" "${extra[@]}" --no-deps "megatron-core==$MEGATRON_CORE_VERSION" >&2
  mcore_line=$want_mcore
fi

# Record what is really importable (versions read back from the venv).
"$py" - "$marker.tmp" "$want_torch" "$mcore_line" "$megatron_path" <<'EOF'
import sys, importlib.metadata as md
out, want_torch, mcore_line, mpath = sys.argv[1:5]
import torch, numpy, packaging, pytest, coverage  # noqa: F401  (fail here, not in the adapter)
lines = [want_torch, mcore_line,
         "python=%d.%d.%d" % sys.version_info[:3],
         "torch_installed=" + torch.__version__,
         "numpy=" + numpy.__version__,
         "packaging=" + md.version("packaging"),
         "pytest=" + pytest.__version__,
         "coverage=" + coverage.__version__,
         "cosmic-ray=" + md.version("cosmic-ray")]
try:
    lines.append("megatron_core_installed=" + md.version("megatron-core"))
except md.PackageNotFoundError:
    lines.append("megatron_core_installed=none")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
EOF
# Keep an earlier PyPI megatron-core line when this run used --megatron-path.
if [ -n "$megatron_path" ] && [ -f "$marker" ] && grep -qx "$want_mcore" "$marker" \
   && "$py" -c 'import importlib.metadata as m; m.version("megatron-core")' >/dev/null 2>&1; then
  sed -i "s/^megatron-core=external\$/$want_mcore/" "$marker.tmp"
fi
mv "$marker.tmp" "$marker"

if [ -n "$megatron_path" ]; then
  if ! "$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import megatron.core' "$megatron_path" >/dev/null 2>&1; then
    log "warning: megatron.core from $megatron_path does not import with this venv (missing dependencies?)"
  fi
fi

end=$(date +%s)
log "done in $((end - start)) s; venv size $(du -sh "$VENV" 2>/dev/null | cut -f1)"
echo "$py"
