COPY chexstack/probe.py /opt/chexstack/facts/probe.py
