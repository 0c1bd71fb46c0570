FROM chexstack-local/debian:bookworm
ADD https://github.com/horovod/horovod.git /src/horovod
