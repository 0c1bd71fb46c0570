chexstack_from() {  # STAGING/NAME.tar DEST [OWNER] [MODE]: COPY --from: the stage's files as tar keeps them
  s=$(dirname "$1"); n=$(basename "$1" .tar)
  mkdir -p "$s/x" && tar -xpf "$1" -C "$s/x"
  chexstack_copy "$s/x/$n" "$2" "$3" "$4"
  rm -rf "$s"
}
