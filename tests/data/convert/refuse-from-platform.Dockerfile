FROM --platform=linux/arm64 chexstack-local/debian:bookworm
