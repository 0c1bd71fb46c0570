# COPY --from=IMAGE (not a stage): the image becomes a stage of its own.
FROM chexstack-local/debian:bookworm
COPY --from=chexstack-local/debian:bookworm /etc/debian_version /opt/base-version
