ENV CHEXSTACK_HOME=/opt/chexstack \
    PYTHONPATH=/opt/chexstack
COPY chexstack/probe.py /opt/chexstack/validate/probe.py
COPY chexstack/trainer /opt/chexstack/trainer
