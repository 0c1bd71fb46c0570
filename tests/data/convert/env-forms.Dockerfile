# ENV: legacy and key=value forms, quotes, references to earlier ENV and to the base image's PATH; every pair of
# one ENV reads the values from before it (A and PATH: the earlier ones), a later pair of the same name wins.
FROM chexstack-local/debian:bookworm
ENV LEGACY value with spaces
ENV A=1 B="two words" C='$literal'
ENV PATH=/opt/tool/bin:$PATH D=${A}-and-$B BASE_PATH=$PATH A=0 A=2 E=$A
RUN echo "$A|$B|$C|$D|$E|$BASE_PATH" > /env-seen.txt && printenv PATH > /path-seen.txt
# chexstack-harness: exec /bin/sh -c "echo $D $E $PATH $BASE_PATH"
