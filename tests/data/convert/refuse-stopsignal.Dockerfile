FROM chexstack-local/debian:bookworm
STOPSIGNAL SIGINT
