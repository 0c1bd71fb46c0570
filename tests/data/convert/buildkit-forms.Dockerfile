# syntax=docker/dockerfile:1.4
# chexstack-harness: no (BuildKit-only syntax; the engine here has the classic builder only)
# BuildKit: a heredoc RUN, a command after the heredoc, a cache mount, COPY --chmod, COPY of several sources to
# . (the classic builder refuses it), WORKDIR after USER (the folders it creates are the user's; the classic
# builder makes them root's).
FROM chexstack-local/debian:bookworm
RUN <<EOT
echo heredoc > /opt/heredoc.txt
echo "second line" >> /opt/heredoc.txt
EOT
RUN cat > /opt/fed.txt <<EOF
fed through stdin
EOF
RUN --mount=type=cache,target=/root/.cache/tool \
    echo cached > /root/.cache/tool/data && echo after-mount > /opt/mount.txt
COPY --chmod=700 files/table.csv /opt/private.csv
WORKDIR /opt/several
COPY files/app.py files/table.csv .
RUN groupadd -g 3000 lab && useradd -u 1500 -m alice
USER 1500:3000
WORKDIR /home/alice/work/deep
RUN touch owned
USER alice
WORKDIR /opt
USER 2500
WORKDIR /srv/by-uid
USER root
