"""Shared plumbing for chexstack's areas (envs/, images/, convert/, facts/, validate/, launch/, bench/, tasks.py):
the floor below every area, which imports none of them (only ``chexstack/__main__.py`` imports ``tasks``).

Only what several areas need lives here, one home each:

- ``chexstack.errors``: ``ChexstackError`` (bad input: the message names the file, line or field and what was
  expected) and ``ExitCode`` (``OK`` 0, ``FAILED`` 1, ``USAGE`` 2, ``TOOL_MISSING`` 3, 128 + signal);
- ``chexstack.console``: the rich consoles (stdout, and stderr for warnings: ``chexstack.console.warn``);
- ``chexstack.outputs``: a result path checked before the work (``output_file``, ``output_folder``);
  ``chexstack.inputs``: a file to read checked (``input_file``);
- ``chexstack.engine``: the one door to the Docker engine (``client``, ``optional_client``);
- ``chexstack.registry``: the one door to OCI registries (skopeo): ``parse`` reads an image reference
  (distribution/reference's grammar) into a ``Reference``; ``resolve`` gives its digest, ``config`` its image config
  (what ``convert`` reads of a base the engine does not hold), ``push`` copies an engine image there; each raises
  ``RegistryError`` naming the registry and the cause;
- ``chexstack.tools``: the one way to run a tool (``chexstack.tools.run`` -> ``ToolRun``: timeout, a missing tool
  recorded, never raised);
- ``chexstack.cli``: invoke's machinery for tasks (``chexstack.cli.task``, ``chexstack.cli.user_errors``,
  ``chexstack.cli.csv_list``) and the ``chexstack`` command's Program (``chexstack.cli.program``; it imports no task).

The trainer does not import it (it runs alone inside the stack images, on Python 3.5).
"""
