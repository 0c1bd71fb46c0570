FROM chexstack-local/debian:bookworm
RUN --network=none make test
