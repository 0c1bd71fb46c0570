# ENV: legacy and key=value forms, quotes, references to earlier ENV and to the base image's PATH.
FROM chexstack-local/debian:bookworm
ENV LEGACY value with spaces
ENV A=1 B="two words" C='$literal'
ENV D=${A}-and-$B PATH=/opt/tool/bin:$PATH
RUN echo "$A|$B|$C|$D" > /env-seen.txt && printenv PATH > /path-seen.txt
# chexstack-harness: exec /bin/sh -c "echo $D $PATH"
