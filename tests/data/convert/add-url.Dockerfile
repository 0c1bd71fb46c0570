# chexstack-harness: no (downloads from the network)
# ADD of a URL: downloaded following redirects, failing on HTTP errors, mode 600, never unpacked; --checksum checked.
FROM chexstack-local/debian:bookworm
ADD https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.13.8.tar.gz /opt/
ADD --checksum=sha256:24b6b2d3a4bd4b6b2d3a4bd4b6b2d3a4bd4b6b2d3a4bd4b6b2d3a4bd4b6b2d3a https://example.org/tool.bin /opt/tool.bin
