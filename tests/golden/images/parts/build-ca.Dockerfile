COPY build-only/ca-certificates.crt /usr/local/share/chexstack-build/ca-certificates.crt
ENV CURL_CA_BUNDLE=/usr/local/share/chexstack-build/ca-certificates.crt \
    PIP_CERT=/usr/local/share/chexstack-build/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/usr/local/share/chexstack-build/ca-certificates.crt \
    SSL_CERT_FILE=/usr/local/share/chexstack-build/ca-certificates.crt
