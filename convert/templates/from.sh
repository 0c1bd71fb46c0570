chexstack_from() {  # STAGING/NAME.tar DEST [OWNER] [MODE]: COPY --from: the stage's files as tar keeps them (NAME "matches": every match of a pattern)
  s=$(dirname "$1"); n=$(basename "$1" .tar)
  mkdir -p "$s/x" && tar -xpf "$1" -C "$s/x"
  if [ "$n" != matches ]; then chexstack_copy "$s/x/$n" "$2" "$3" "$4"; rm -rf "$s"; return; fi
  set -- "$s" "$2" "$3" "$4" "$(ls -A "$s/x" | wc -l)"
  case "$2" in */) ;; *) [ "$5" -le 1 ] || { echo "COPY --from: $5 files match, so the destination $2 must be a folder (end it in /)" >&2; exit 1; } ;; esac
  for f in $(ls -A "$1/x"); do mkdir "$1/m-$f" && mv "$1/x/$f" "$1/m-$f/" && chexstack_copy "$1/m-$f/$f" "$2" "$3" "$4"; done
  rm -rf "$1"
}
