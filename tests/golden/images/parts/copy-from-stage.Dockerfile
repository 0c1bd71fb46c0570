COPY --from=devel /opt/venv /opt/venv
