chexstack_as() {  # USER[:GROUP] ARGV...: a RUN after USER, as Docker runs it: uid, gid, groups, HOME
  u=${1%%:*}; g=${1#"$u"}; g=${g#:}; shift
  if [ -n "$g" ]; then groups=--clear-groups
  elif getent passwd "$u" >/dev/null; then g=$(id -g "$u"); groups=--init-groups
  else g=0; groups=--clear-groups; fi
  h=$(getent passwd "$u" | cut -d: -f6)
  HOME=${h:-/} setpriv --reuid="$u" --regid="$g" $groups -- "$@"
}
