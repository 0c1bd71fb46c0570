FROM chexstack-local/debian:bookworm
ONBUILD COPY . /app
