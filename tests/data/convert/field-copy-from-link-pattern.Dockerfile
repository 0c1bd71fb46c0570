# COPY --from of a source that is a symbolic link copies what it points to (BuildKit follows it; the links inside a
# folder stay links), and a pattern in a --from source whose match depends on the architecture (a wheel named by it)
# is matched in that stage (issue 45).
FROM chexstack-local/debian:bookworm AS build
RUN mkdir -p /out/dir /w && echo real > /out/real && ln -s real /out/link && ln -s ../real /out/dir/in \
    && ln -s dir /out/dirlink && touch "/w/tool-$(uname -m).whl" /w/other.txt
FROM chexstack-local/debian:bookworm
COPY --from=build /out/link /opt/file
COPY --from=build /out/dirlink /opt/dir
COPY --from=build /w/tool-*.whl /opt/wheels/
