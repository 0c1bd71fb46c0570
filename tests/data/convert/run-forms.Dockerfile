# syntax=docker/dockerfile:1.4
# RUN: a simple command, a list, exec form, a heredoc, SHELL with pipefail, a cache mount, continuations.
FROM chexstack-local/debian:bookworm
RUN mkdir -p /opt/run
RUN cd /opt/run && echo listed > list.txt
RUN ["/bin/sh", "-c", "echo exec-form > /opt/run/exec.txt"]
RUN <<EOT
echo heredoc > /opt/run/heredoc.txt
echo "second line" >> /opt/run/heredoc.txt
EOT
RUN --mount=type=cache,target=/root/.cache/tool \
    echo cached > /root/.cache/tool/data && \
    # a comment inside the continuation
    echo after-mount > /opt/run/mount.txt
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN echo "$BASH_VERSION" | cut -d. -f1 > /opt/run/bash-major.txt
RUN false || echo "the list's status counts" > /opt/run/status.txt
