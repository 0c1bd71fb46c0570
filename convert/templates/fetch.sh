chexstack_fetch() {  # URL DEST [OWNER] [SHA256]: Dockerfile ADD of a URL: redirects followed, HTTP errors fail, mode 600
  case "$2" in */) f="$2$(basename "${1%%[?#]*}")" ;; *) f="$2" ;; esac
  mkdir -p "$(dirname "$f")"
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -R -o "$f" "$1"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$f" "$1"
  else echo "ADD $1: the image needs curl or wget" >&2; exit 1; fi
  [ -z "$4" ] || echo "$4  $f" | sha256sum -c -
  chmod 600 "$f"
  case "$3" in ""|*:*) o=$3 ;; *[!0-9]*) o="$3:$(id -g "$3")" ;; *) o="$3:$3" ;; esac  # no group: as COPY
  [ -z "$o" ] || chown "$o" "$f"
}
