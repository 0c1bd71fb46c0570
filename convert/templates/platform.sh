chexstack_platform() {  # NAME: Docker's automatic platform ARG NAME (TARGETARCH...) for the machine that builds
  case "$(uname -m)" in
    x86_64|amd64) a=amd64 v= ;;
    aarch64|arm64) a=arm64 v= ;;
    armv8*) a=arm64 v= ;;
    armv7*) a=arm v=v7 ;;
    armv6*) a=arm v=v6 ;;
    armv5*) a=arm v=v5 ;;
    i386|i486|i586|i686) a=386 v= ;;
    *) a=$(uname -m) v= ;;
  esac
  o=$(uname -s | tr '[:upper:]' '[:lower:]')
  case "$1" in
    *OS) echo "$o" ;;
    *ARCH) echo "$a" ;;
    *VARIANT) echo "$v" ;;
    *PLATFORM) echo "$o/$a${v:+/$v}" ;;
  esac
}
