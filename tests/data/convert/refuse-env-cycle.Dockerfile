FROM chexstack-local/debian:bookworm
ENV A=$B B=$A
