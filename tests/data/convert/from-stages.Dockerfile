# Stages named and by index: COPY --from=NAME and --from=0, a file and a folder's contents.
FROM chexstack-local/debian:bookworm
RUN mkdir -p /out && echo zero > /out/zero.txt

FROM chexstack-local/debian:bookworm AS builder
RUN mkdir -p /build/lib && echo one > /build/lib/one.txt && echo two > /build/lib/two.txt

FROM chexstack-local/debian:bookworm
COPY --from=0 /out/zero.txt /opt/from-index/
COPY --from=builder /build/lib /opt/lib
RUN ls /opt/lib/one.txt /opt/from-index/zero.txt
