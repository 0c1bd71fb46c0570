"""An existing Dockerfile -> a Singularity/Apptainer definition that builds and runs the same image
(``invoke convert``), or a refusal naming the line.

- ``convert.dockerfile``: the converter, ``convert(path, build_args) -> Conversion(text, warnings)``;
- ``convert.definition``: the one model of a definition file (``Definition.parse(text)``, ``.text()``), which the
  converter writes and the tests' Apptainer harness reads;
- ``convert.words``: Docker's word processing (quotes, escapes, ``$NAME``, ``${NAME:-word}`` ...) of an instruction;
- ``convert.dockerignore``: what of a build context Docker's ``COPY``/``ADD`` sees (the ``.dockerignore`` rules);
- ``convert/templates/<need>.sh``: the shell functions a converted ``%post`` defines when it needs them (``HELPERS``);
- ``convert.lint``: the invariants every rendered definition keeps, the stack recipes' (``images.render``) too.

Below ``images`` (``tests/test_layers.py``): ``images`` may import ``convert``, never the reverse.
"""
