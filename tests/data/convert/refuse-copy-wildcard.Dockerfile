FROM chexstack-local/debian:bookworm
COPY files/*.py /app/
