FROM chexstack-local/debian:bookworm
# Docker sets no variable for an ARG without a value: ${VERSION:-dev} reads the base image's VERSION, if any
ARG VERSION
LABEL version=${VERSION:-dev}
