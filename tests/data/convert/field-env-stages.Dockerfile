# The field's false refusals, on the local Debian base (issue 45): the converter's own stage name (stage1 for the
# unnamed stage) collides with a user's `AS stage1`; a second ENV PATH=...:$PATH; a nested ${VAR:+${VAR}:} word;
# a WORKDIR without ENTRYPOINT: the runscript starts there, as `docker run` does.
# chexstack-harness: run sh -c "pwd; echo $PATH; cat /opt/from-stage1 /opt/from-unnamed /opt/env.txt"
FROM chexstack-local/debian:bookworm AS stage1
RUN echo user-named > /named
FROM chexstack-local/debian:bookworm
RUN echo unnamed > /unnamed
FROM chexstack-local/debian:bookworm
ENV PATH=/a/bin:$PATH
ENV PATH="/b/bin:${PATH}" HOME="/home/x"
ENV LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}/usr/local/nvidia/lib64"
COPY --from=stage1 /named /opt/from-stage1
COPY --from=1 /unnamed /opt/from-unnamed
RUN echo "$PATH $LD_LIBRARY_PATH" > /opt/env.txt
WORKDIR /srv/app
