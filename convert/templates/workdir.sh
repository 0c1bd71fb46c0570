chexstack_workdir() {  # USER[:GROUP] DIR: WORKDIR after USER (BuildKit): the folders it creates are the user's
  u=${1%%:*}; g=${1#"$u"}; g=${g#:}
  case "$u" in
    *[!0-9]*) e=$(getent passwd "$u") || { echo "WORKDIR $2: no user $u in /etc/passwd" >&2; exit 1; }
      u=$(echo "$e" | cut -d: -f3); [ -n "$g" ] || g=$(echo "$e" | cut -d: -f4) ;;
    *) [ -n "$g" ] || g=$u ;;
  esac
  case "$g" in
    *[!0-9]*) e=$(getent group "$g") || { echo "WORKDIR $2: no group $g in /etc/group" >&2; exit 1; }
      g=$(echo "$e" | cut -d: -f3) ;;
  esac
  n=$2; top=
  while [ ! -e "$n" ] && [ ! -L "$n" ]; do top=$n; n=$(dirname "$n"); done
  mkdir -p "$2"
  n=$2
  while [ -n "$top" ]; do chown "$u:$g" "$n"; [ "$n" != "$top" ] || break; n=$(dirname "$n"); done
}
