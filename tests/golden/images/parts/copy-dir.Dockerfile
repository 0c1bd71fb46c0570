COPY chexstack/trainer /opt/chexstack/trainer
