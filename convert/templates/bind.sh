chexstack_bind() {  # SOURCE TARGET: RUN --mount=type=bind: TARGET (emptied by chexstack_mount) shows SOURCE, a staged path or a stage's packed NAME.tar: a folder's contents, or the file
  if [ "${1%.tar}" != "$1" ] && [ -f "$1" ]; then
    s=$(dirname "$1"); n=$(basename "$1" .tar); mkdir -p "$s/x" && tar -xpf "$1" -C "$s/x"; set -- "$s/x/$n" "$2" "$s"
  else set -- "$1" "$2" "$(dirname "$1")"; fi
  if [ -d "$1" ] && [ ! -L "$1" ]; then cp -a "$1/." "$2/"; else rmdir "$2" && cp -a "$1" "$2"; fi
  rm -rf "$3"
}
