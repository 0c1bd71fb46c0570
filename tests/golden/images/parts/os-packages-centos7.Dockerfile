RUN yum install -y \
        curl \
        git && \
    rm -rf /var/cache/yum/*
