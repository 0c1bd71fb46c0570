FROM chexstack-local/debian:bookworm
COPY files/app.py files/table.csv /app
