FROM chexstack-local/debian:bookworm
WORKDIR $HOME/app
