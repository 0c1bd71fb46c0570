# COPY: several sources into a WORKDIR-relative folder, a folder's contents, --chown, --chmod, the JSON form.
FROM chexstack-local/debian:bookworm
RUN useradd -u 1234 -m worker
WORKDIR /opt/app
COPY files/app.py files/table.csv ./
COPY files/tree /opt/tree/
COPY --chown=worker:worker files/tree /opt/owned
COPY --chmod=700 files/table.csv /opt/private.csv
COPY ["files/app.py", "/opt/json-form.py"]
RUN ls -la /opt/app /opt/tree /opt/owned > /copy-listing.txt
