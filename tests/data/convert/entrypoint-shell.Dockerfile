# ENTRYPOINT shell form: /bin/sh -c TEXT; arguments become $0 $1 ... of that shell.
FROM chexstack-local/debian:bookworm
ENTRYPOINT echo "shell entry $0 $1"
# chexstack-harness: run first second
