RUN echo one && \
    echo two
