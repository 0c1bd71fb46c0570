# CMD without ENTRYPOINT: Docker runs the base image's ENTRYPOINT with it; where the base's config is not read, the
# runscript takes it from what Apptainer's bootstrap recorded (OCI_ENTRYPOINT), at build time.
# chexstack-harness: run head -1 /etc/os-release
FROM chexstack-local/debian:bookworm
CMD ["cat", "/etc/debian_version"]
