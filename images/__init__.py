"""How a stack becomes an artifact: hpccm recipes (one per stack family), rendering to Dockerfile or Singularity
definition, Docker builds through the docker SDK, verification inside the built image, SIF conversion.

Every image carries the trainer and the validation code under ``/opt/chexstack`` (``CHEXSTACK_HOME``) and puts the
stack's Python first on PATH as ``python``.
"""
