chexstack_add() {  # STAGED DEST [OWNER] [MODE]: Dockerfile ADD of a local source: a tar archive is unpacked
  if [ -f "$1" ] && tar -tf "$1" >/dev/null 2>&1; then
    mkdir -p "$2" && tar -xf "$1" -C "$2" && rm -rf "$(dirname "$1")"
  else
    chexstack_copy "$@"
  fi
}
