# Shell helpers of the device scripts (bench/gpu_check.sh, bench/device_validate.sh), sourced after `cd` to the
# checkout's root with TAG set to the script's name and `dry` (0 or 1) and `missing` (a count) defined:
#   say TEXT...   a progress line "[TAG] TEXT" (bold on a terminal)
#   warn TEXT...  a missing prerequisite on stderr "[TAG] missing: TEXT", counted in $missing
#   run CMD...    print "+ CMD" (shell-quoted), then run it unless dry=1
if [ -t 1 ]; then _b=$'\033[1m' _y=$'\033[1;33m' _n=$'\033[0m'; else _b= _y= _n=; fi
say() { printf '%s[%s]%s %s\n' "$_b" "$TAG" "$_n" "$*"; }
warn() { printf '%s[%s] missing:%s %s\n' "$_y" "$TAG" "$_n" "$*" >&2; missing=$((missing + 1)); }
run() {
  local line; line=$(printf '%q ' "$@")
  printf '+ %s\n' "${line% }"
  if [ "$dry" = 0 ]; then "$@"; fi
}
