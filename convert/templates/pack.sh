chexstack_pack() {  # PARENT PATTERN ARCHIVE: COPY --from's source as BuildKit reads it: each match of PATTERN in PARENT, a symbolic link followed to what it points to (the links inside a folder kept), packed by tar
  d="$3.d"; rm -rf "$d"; mkdir -p "$d"
  for m in $(cd "$1" && for p in $2; do echo "$p"; done); do
    [ -e "$1/$m" ] || { echo "COPY --from: no file matches $1/$2 in this stage (Docker's COPY fails too)" >&2; exit 1; }
    cp -a "$(readlink -f "$1/$m")" "$d/$m"
  done
  tar -C "$d" -cf "$3" . && rm -rf "$d"
}
