FROM chexstack-local/debian:bookworm
VOLUME /data
