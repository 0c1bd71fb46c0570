# COPY: several sources into a WORKDIR-relative folder, a folder's contents, --chown (user and group, a numeric ID
# alone: it is the group too), the JSON form.
FROM chexstack-local/debian:bookworm
RUN useradd -u 1234 -m worker
WORKDIR /opt/app
COPY files/app.py files/table.csv ./
COPY files/tree /opt/tree/
COPY --chown=worker:worker files/tree /opt/owned
COPY --chown=4321 files/app.py /opt/owned-by-id.py
COPY ["files/app.py", "/opt/json-form.py"]
RUN find /opt/app /opt/tree /opt/owned /opt/owned-by-id.py -exec stat -c "%n %a %U %G %s" {} + > /copy-listing.txt
