RUN apt-get update -y && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openssh-client \
        openssh-server && \
    rm -rf /var/lib/apt/lists/*
RUN mkdir -p /var/run/sshd && \
    ssh-keygen -A && \
    printf '%s\n' '# chexstack (images/mpijob.py): the MPIJob key is a read-only Secret mount' 'StrictModes no' | cat - /etc/ssh/sshd_config > /etc/ssh/sshd_config.chexstack && cat /etc/ssh/sshd_config.chexstack > /etc/ssh/sshd_config && rm -f /etc/ssh/sshd_config.chexstack && \
    printf '%s\n' '# chexstack (images/mpijob.py): every MPIJob pod is a new host; ~/.ssh is a read-only Secret' 'StrictHostKeyChecking no' 'UserKnownHostsFile /dev/null' | cat - /etc/ssh/ssh_config > /etc/ssh/ssh_config.chexstack && cat /etc/ssh/ssh_config.chexstack > /etc/ssh/ssh_config && rm -f /etc/ssh/ssh_config.chexstack
