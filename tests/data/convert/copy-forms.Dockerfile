# COPY: several sources into a WORKDIR-relative folder, a folder's contents, --chown, the JSON form.
FROM chexstack-local/debian:bookworm
RUN useradd -u 1234 -m worker
WORKDIR /opt/app
COPY files/app.py files/table.csv ./
COPY files/tree /opt/tree/
COPY --chown=worker:worker files/tree /opt/owned
COPY ["files/app.py", "/opt/json-form.py"]
RUN find /opt/app /opt/tree /opt/owned -exec stat -c "%n %a %U %G %s" {} + > /copy-listing.txt
