FROM chexstack-local/debian:bookworm
ARG V=1.2.3
ENV MAJOR=${V%%.*}
