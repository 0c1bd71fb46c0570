ENV GREETING="hello world" \
    PATH=/opt/venv/bin:$PATH \
    Q="say \"hi\""
