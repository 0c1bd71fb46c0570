COPY chexstack/probe.py /opt/chexstack/validate/probe.py
