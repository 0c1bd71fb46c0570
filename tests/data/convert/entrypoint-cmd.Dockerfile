# ENTRYPOINT (exec) + CMD (exec): CMD is the default arguments; the user's arguments replace it.
FROM chexstack-local/debian:bookworm
WORKDIR /srv
ENTRYPOINT ["/bin/echo", "entry:"]
CMD ["default", "args"]
# chexstack-harness: run mine "two words"
# chexstack-harness: exec /bin/sh -c "echo exec with \"$*\"" sh a b
