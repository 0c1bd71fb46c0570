FROM chexstack-local/debian:bookworm
RUN --mount=type=secret,id=token cat /run/secrets/token
