FROM chexstack-local/debian:bookworm
SHELL ["powershell", "-Command"]
