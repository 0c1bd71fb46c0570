# ENTRYPOINT [] + CMD shell form: CMD runs through /bin/sh -c unless arguments are given.
FROM chexstack-local/debian:bookworm
ENV GREETING=hi
ENTRYPOINT []
CMD echo "$GREETING from $(pwd)"
# chexstack-harness: run /bin/echo replaced
