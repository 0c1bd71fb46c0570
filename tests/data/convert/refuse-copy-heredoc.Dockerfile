FROM chexstack-local/debian:bookworm
COPY <<EOF /etc/motd
hello
EOF
