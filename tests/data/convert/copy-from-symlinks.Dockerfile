# COPY --from of a folder with symbolic links and files of another owner: links stay links, owners become root.
FROM chexstack-local/debian:bookworm AS build
RUN mkdir -p /venv/bin /venv/lib && echo lib > /venv/lib/mod.py && ln -s lib /venv/lib64 \
    && ln -s /usr/bin/env /venv/bin/env && chown -R 1000:1000 /venv/lib
FROM chexstack-local/debian:bookworm
COPY --from=build /venv /opt/venv
