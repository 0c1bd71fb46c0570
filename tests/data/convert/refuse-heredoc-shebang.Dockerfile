FROM chexstack-local/debian:bookworm
RUN <<EOT
#!/usr/bin/env python3
print("hi")
EOT
