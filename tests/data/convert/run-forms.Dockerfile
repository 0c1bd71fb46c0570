# RUN: a simple command, a list, exec form, SHELL with pipefail, a list whose first command fails, continuations.
FROM chexstack-local/debian:bookworm
RUN mkdir -p /opt/run
RUN cd /opt/run && echo listed > list.txt
RUN ["/bin/sh", "-c", "echo exec-form > /opt/run/exec.txt"]
RUN echo one > /opt/run/continued.txt && \
    # a comment inside the continuation
    echo two >> /opt/run/continued.txt
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN echo "$BASH_VERSION" | cut -d. -f1 > /opt/run/bash-major.txt
RUN false || echo "the list's status counts" > /opt/run/status.txt
