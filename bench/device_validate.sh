#!/usr/bin/env bash
# Validate a real GPU node from a copy of this checkout (issue 40, item 8): live `invoke validate --collect` and the
# CUDA probe (facts/cuda_probe.py), on a node that has Python and CUDA but no TensorFlow and no network. validate's
# Python dependencies travel with the checkout as wheels, prepared here; the bundle comes back as one archive.
#
#   bench/device_validate.sh --prepare      here, with a package index: download the wheels into $WHEELS, check size
#   bench/device_validate.sh                on the GPU node: venv from the wheels, the probe, validate --collect
#   bench/device_validate.sh --dry-run      print every step of the node's run without running any (exit 0)
#   bench/device_validate.sh --check-size   is the checkout + $WHEELS within $CAP_MIB? (exit 1 when not)
#
# What validate imports outside the standard library (an `invoke validate --collect` of every check, its
# sys.modules): invoke, rich, pydantic, PyYAML, docker (its SDK, imported by the container checks' modules), numpy,
# psutil, and packaging (facts/openmpi.py); pip brings what they need (markdown-it-py, mdurl, Pygments,
# pydantic_core, annotated-types, typing_extensions, typing-inspection, requests, urllib3, certifi,
# charset-normalizer, idna), and pip's own wheel. Their versions are requirements/constraints.txt's. Not
# TensorFlow, Horovod or mpi4py: the checks that need them judge their absence (horovod.env FAILs HOROVOD_IMPORT:
# this node cannot train as it is). 25,905 KiB of wheels for CPython 3.12 on x86-64 Linux (measured), beside a
# 3.6 MiB checkout.
#
# Steps on the node (each printed as `+ CMD` before it runs):
#   1. a throwaway venv ($VENV) with the wheels: pip install --no-index --find-links $WHEELS (pip itself from its
#      wheel where the Python has no ensurepip)
#   2. the CUDA probe alone: $OUT/cuda-probe.jsonl (its exit status is reported, not fatal: validate judges it)
#   3. invoke validate --collect $OUT/bundle --json $OUT/report.json (exit 0 no FAIL, 1 a FAIL: both are results)
#   4. the bundle as one archive, $OUT/validate-bundle.tar.gz (a bundle is many files), the run's log beside it
# Judge it anywhere: tar -xzf validate-bundle.tar.gz && invoke validate --from bundle.
#
# With the device tool of this workplace (/work/.library/device/README.md): run --prepare here, then
#   run(command="bench/device_validate.sh", carry=[".validate-wheels"]); the files come back from $OUT.
#
# Environment: PYTHON (python3; 3.10 or later), WHEELS (.validate-wheels, ignored by git), VENV
#   (${TMPDIR:-/tmp}/chexstack-validate-venv), OUT (where the results go; default ${TMPDIR:-/tmp}/chexstack-device-
#   validate), TARGET_PYTHON (--prepare: the node's Python, 3.12), CAP_MIB (64: what may travel with the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=node
dry=0
for a in "$@"; do
  case "$a" in
    --prepare) mode=prepare ;;
    --check-size) mode=size ;;
    --dry-run) dry=1 ;;
    *) echo "device_validate: unknown option '$a' (expected: --prepare, --check-size, --dry-run)" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.validate-wheels}
VENV=${VENV:-${TMPDIR:-/tmp}/chexstack-validate-venv}
OUT=${OUT:-${TMPDIR:-/tmp}/chexstack-device-validate}
TARGET_PYTHON=${TARGET_PYTHON:-3.12}
CAP_MIB=${CAP_MIB:-64}
#: what validate imports (above); pip adds their dependencies
PACKAGES=(invoke rich pydantic PyYAML docker numpy psutil packaging)
#: the wheels' platforms: manylinux x86-64 (pip matches each tag exactly)
PLATFORMS=(manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_28_x86_64 manylinux1_x86_64)

TAG=device_validate
. bench/lib.sh  # say, warn, run

# Bytes of what travels: the checkout's files (tracked, and untracked ones git does not ignore) and the wheels.
check_size() {
  local checkout wheels total cap
  checkout=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null \
    | awk '{s += $1} END {print s + 0}')
  wheels=0
  if [ -d "$WHEELS" ]; then wheels=$(find "$WHEELS" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'); fi
  total=$((checkout + wheels))
  cap=$((CAP_MIB * 1024 * 1024))
  say "size: checkout $((checkout / 1024)) KiB + wheels $((wheels / 1024)) KiB ($WHEELS) = $((total / 1024)) KiB;" \
      "cap ${CAP_MIB} MiB"
  if [ "$total" -gt "$cap" ]; then
    echo "[device_validate] error: $((total / 1024)) KiB is over the cap of ${CAP_MIB} MiB (CAP_MIB): leave out" \
         "a package or carry less" >&2
    return 1
  fi
}

if [ "$mode" = size ]; then
  check_size
  exit
fi

if [ "$mode" = prepare ]; then
  platform_args=()
  for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
  run mkdir -p "$WHEELS"
  run "$PYTHON" -m pip download -q --dest "$WHEELS" --only-binary=:all: --implementation cp \
    --python-version "$TARGET_PYTHON" "${platform_args[@]}" -c requirements/constraints.txt "${PACKAGES[@]}" pip
  if [ "$dry" = 0 ]; then check_size; else say "dry run: then the size check (--check-size)"; fi
  exit
fi

# On the node. 0. Prerequisites: every gap is reported; a real run stops on them, a dry run goes on.
missing=0
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)' 2>/dev/null \
  || warn "Python 3.10 or later as PYTHON (is: $("$PYTHON" -V 2>&1 || echo none))"
ls "$WHEELS"/*.whl >/dev/null 2>&1 \
  || warn "the wheels in WHEELS=$WHEELS (bench/device_validate.sh --prepare, then carry it)"
command -v nvidia-smi >/dev/null || warn "nvidia-smi (an NVIDIA driver): validate judges a node without GPUs as one"
if [ "$missing" != 0 ] && [ "$dry" = 0 ]; then
  echo "[device_validate] $missing prerequisite(s) missing (above); nothing was run" >&2
  exit 2
fi

# 1. A throwaway venv with validate's dependencies, from the wheels alone. A Python without ensurepip (Debian's and
#    Ubuntu's without python3-venv) makes it without pip, and pip is then run from its own wheel to install itself.
run rm -rf "$VENV"
printf '+ %s -m venv %s || { %s -m venv --without-pip %s && %s/bin/python %s/pip-*.whl/pip install -q --no-index' \
  "$PYTHON" "$VENV" "$PYTHON" "$VENV" "$VENV" "$WHEELS"
printf ' --find-links %s pip; }\n' "$WHEELS"
if [ "$dry" = 0 ] && ! "$PYTHON" -m venv "$VENV"; then
  say "no ensurepip in $PYTHON: pip from its wheel"
  rm -rf "$VENV"
  "$PYTHON" -m venv --without-pip "$VENV"
  pip_wheel=$(ls "$WHEELS"/pip-*.whl | head -n 1)
  "$VENV/bin/python" "$pip_wheel/pip" install -q --no-index --find-links "$WHEELS" pip
fi
run "$VENV/bin/python" -m pip install -q --no-index --find-links "$WHEELS" -c requirements/constraints.txt \
  "${PACKAGES[@]}"
run mkdir -p "$OUT"

# 2. The CUDA probe alone (its record is in the bundle too; this copy reads without chexstack).
probe_rc=0
printf '+ %s > %s\n' "$VENV/bin/python facts/cuda_probe.py" "$OUT/cuda-probe.jsonl"
if [ "$dry" = 0 ]; then "$VENV/bin/python" facts/cuda_probe.py >"$OUT/cuda-probe.jsonl" || probe_rc=$?; fi

# 3. Every check, live, recorded into a bundle (exit 1 is a FAIL found: a result, not an error of this script).
validate_rc=0
line=$(printf '%q ' env PYTHONPATH="$PWD" "$VENV/bin/invoke" validate --collect "$OUT/bundle" --json "$OUT/report.json")
printf '+ %s > %s 2>&1\n' "${line% }" "$OUT/validate.log"
if [ "$dry" = 0 ]; then
  rm -rf "$OUT/bundle"
  env PYTHONPATH="$PWD" COLUMNS=160 "$VENV/bin/invoke" validate --collect "$OUT/bundle" --json "$OUT/report.json" \
    >"$OUT/validate.log" 2>&1 || validate_rc=$?
  cat "$OUT/validate.log"
fi

# 4. The bundle as one archive (the device tool brings back a few files, not a folder of many).
run tar -czf "$OUT/validate-bundle.tar.gz" -C "$OUT" bundle
if [ "$dry" = 0 ]; then
  rm -rf "$OUT/bundle"
  say "cuda probe exit $probe_rc, validate exit $validate_rc; in $OUT: cuda-probe.jsonl, report.json, validate.log," \
      "validate-bundle.tar.gz"
  [ "$validate_rc" -le 1 ] || exit "$validate_rc"
else
  say "dry run: $missing prerequisite(s) missing on this machine; nothing was run"
fi
