# ARG before FROM resolves FROM only, each default with the ARGs before it, and one without a value its
# ${NAME:-word} and ${NAME:+word}; redeclared it has its value; an ENV of the same name wins over an ARG.
ARG REPO=chexstack-local/debian
ARG TAG
ARG BASE=${REPO}:${TAG:-bookworm}
ARG RELEASE=1.0
FROM ${BASE}${TAG:+-tagged}
ARG RELEASE
ARG STAGE_ONLY=staged
ENV MODE=env-value
ARG MODE=arg-value
RUN echo "release=$RELEASE stage=$STAGE_ONLY mode=$MODE base=${BASE:-unset}" > /arg-scope.txt
ENV RELEASE_SEEN=${RELEASE}
