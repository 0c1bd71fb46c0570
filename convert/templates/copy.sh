chexstack_copy() {  # STAGING/NAME DEST [OWNER] [MODE]: Dockerfile COPY: a folder's contents, not the folder
  # --chown without a group (BuildKit's readUser): a name gets its passwd group, a numeric ID the same ID
  case "$3" in ""|*:*) ;; *[!0-9]*) set -- "$1" "$2" "$3:$(id -g "$3")" "$4" ;; *) set -- "$1" "$2" "$3:$3" "$4" ;; esac
  [ -z "$3" ] || chown -R "$3" "$1"
  [ -z "$4" ] || chmod -R "$4" "$1"
  if [ -d "$1" ] && [ ! -L "$1" ]; then d=${2%/}; else case "$2" in */) d=${2%/} ;; *) d=$(dirname "$2") ;; esac; fi
  d=${d:-/}; n=$d; new=
  while [ ! -e "$n" ]; do new="$n $new"; n=$(dirname "$n"); done
  mkdir -p "$d"
  [ -z "$3" ] || [ -z "$new" ] || chown "$3" $new
  if [ -d "$1" ] && [ ! -L "$1" ]; then
    for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do if [ -e "$e" ] || [ -L "$e" ]; then cp -a "$e" "$d"/; fi; done
  else
    cp -a "$1" "$2"
  fi
  rm -rf "$(dirname "$1")"
}
