# LABEL with several quoted keys and values, MAINTAINER, EXPOSE, STOPSIGNAL SIGTERM, HEALTHCHECK NONE.
FROM chexstack-local/debian:bookworm
ARG VERSION=2.1
LABEL org.opencontainers.image.title="chexstack corpus" \
      "org.opencontainers.image.version"=$VERSION maintainer.team=hpc
MAINTAINER hpc team <hpc@example.org>
EXPOSE 8080/tcp 9090
STOPSIGNAL SIGTERM
HEALTHCHECK NONE
RUN true
