# chexstack-harness: no (BuildKit's automatic platform ARGs; this engine's API builds with the classic builder)
# FROM --platform naming the machine that builds, and the automatic platform ARGs a stage declares: BuildKit gives
# them the builder's platform on a native build, as an Apptainer build always is.
FROM --platform=$BUILDPLATFORM chexstack-local/debian:bookworm AS build
ARG TARGETARCH
ARG TARGETPLATFORM
RUN echo "arch=$TARGETARCH platform=$TARGETPLATFORM" > /arch.txt
FROM --platform=${TARGETPLATFORM} chexstack-local/debian:bookworm
ARG TARGETOS=linux
COPY --from=build /arch.txt /opt/
RUN echo "os=$TARGETOS" >> /opt/arch.txt
