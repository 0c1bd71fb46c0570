FROM chexstack-local/debian:bookworm
HEALTHCHECK --interval=30s CMD curl -f http://localhost/ || exit 1
