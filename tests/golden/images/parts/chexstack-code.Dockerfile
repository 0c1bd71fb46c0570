ENV CHEXSTACK_HOME=/opt/chexstack \
    PYTHONPATH=/opt/chexstack
COPY chexstack/probe.py /opt/chexstack/facts/probe.py
COPY chexstack/trainer /opt/chexstack/trainer
