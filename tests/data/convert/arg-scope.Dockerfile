# ARG before FROM resolves FROM only; redeclared it has its value; an ENV of the same name wins over an ARG.
ARG BASE=chexstack-local/debian:bookworm
ARG RELEASE=1.0
FROM ${BASE}
ARG RELEASE
ARG STAGE_ONLY=staged
ENV MODE=env-value
ARG MODE=arg-value
RUN echo "release=$RELEASE stage=$STAGE_ONLY mode=$MODE base=${BASE:-unset}" > /arg-scope.txt
ENV RELEASE_SEEN=${RELEASE}
