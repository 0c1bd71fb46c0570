FROM chexstack-local/debian:bookworm AS base
RUN true
FROM base
RUN true
