FROM chexstack-local/debian:bookworm
COPY files/link-to-app.py /opt/
