COPY build-only/gate /usr/local/share/chexstack-build/gate
RUN cd /usr/local/share/chexstack-build/gate && \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /opt/venv/bin/python -m facts.horovod_gate --require framework=TensorFlow,controller=MPI,controller=Gloo
