FROM chexstack-local/debian:bookworm
CMD ["python", "app.py"]
