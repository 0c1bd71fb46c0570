FROM chexstack-local/debian:bookworm
LABEL "two words"=value
