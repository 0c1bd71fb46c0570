FROM chexstack-local/debian:bookworm
RUN true

BOGUS thing
