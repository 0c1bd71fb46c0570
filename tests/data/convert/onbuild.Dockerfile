FROM chexstack-local/debian:bookworm
# ONBUILD acts on images built FROM this one only: dropped, with a warning
ONBUILD COPY . /app
RUN echo built > /built.txt
