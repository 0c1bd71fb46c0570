"""An existing Dockerfile -> a Singularity/Apptainer definition that builds and runs the same image
(``invoke convert``), or a refusal naming the line.

- ``convert.dockerfile``: the converter, ``convert.dockerfile.convert(path, build_args) -> Conversion(text, warnings,
  reads)`` (``reads``: the context's files it read, which ``convert.dockerfile.save`` never writes over; ``save``
  writes atomically). It keeps each instruction's Docker meaning or raises ``ChexstackError`` "FILE:LINE:
  INSTRUCTION: why" (exit 2);
- ``convert.definition``: the one model of a definition file, ``Definition`` of ``Stage`` of ``Section`` (frozen):
  the converter writes it (``Definition.text()``), the tests' Apptainer harness reads it (``Definition.parse(text)``,
  a ChexstackError naming the line); ``parse(t).text() == t`` for every golden definition, hpccm's included;
- ``convert.words``: Docker's word processing (quotes, escapes, ``$NAME``, ``${NAME:-word}`` ...) of an instruction
  (``convert.words.words``, ``literal``, ``shell``, ``unknown``);
- ``convert.dockerignore``: what of a build context Docker's ``COPY``/``ADD`` sees (``convert.dockerignore.Context``,
  the ``.dockerignore`` rules);
- ``convert/templates/<need>.sh``: the shell functions a converted ``%post`` defines when it needs them
  (``convert.dockerfile.HELPERS``);
- ``convert.lint``: the invariants every rendered definition keeps (``convert.lint.lint_definition``), the stack
  recipes' (``images.render``) too.

A new mapping or refusal gets a corpus pair: ``tests/data/convert/<name>.Dockerfile`` (or
``tests/data/convert/<name>/Dockerfile`` when it needs a build context of its own) and
``tests/golden/convert/<name>.def|.refused`` (``tests/test_convert.py``), which the harness also builds both ways.

Below ``images`` (``tests/test_layers.py``): ``images`` may import ``convert``, never the reverse.
"""
