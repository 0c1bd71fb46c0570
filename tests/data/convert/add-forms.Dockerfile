# ADD: a local tar archive is unpacked into the folder; a plain file is copied.
FROM chexstack-local/debian:bookworm
ADD files/pkg-1.0.tar.gz /opt/src/
ADD files/table.csv /opt/data/
RUN test -f /opt/src/pkg-1.0/setup.py && test -f /opt/data/table.csv
