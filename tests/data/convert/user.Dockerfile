# USER by name, by uid:gid and back to root: who owns what each RUN writes, and HOME.
FROM chexstack-local/debian:bookworm
RUN useradd -u 1500 -m alice && mkdir -p /work && chmod 777 /work
USER alice
RUN touch /work/by-alice && echo "$HOME" > /work/alice-home
USER 2000:3000
RUN touch /work/by-2000
USER root
RUN touch /work/by-root
