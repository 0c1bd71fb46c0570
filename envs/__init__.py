"""What a stack is: manifests (``envs/stacks/*.yaml``), the seed's Table 1, compatibility rules, conda files and
locks (host side, Python >= 3.10).

What other areas may rely on (signatures and fields are the code's; each module's docstring has the detail):

- **Stack manifests** (``envs.manifest``): ``envs.manifest.load_stack(name)`` -> ``Stack`` (strict pydantic:
  unknown fields stop at load, naming file and field); ``stack.components[row]`` has ``version`` (what the artifact
  must contain), ``reported`` (Table 1's text) and ``source``. The rows are ``envs.manifest.COMPONENTS``; the stacks
  are ``envs.manifest.known_stacks``.
- **Compatibility rules** (``envs.rules``, data in ``envs/rules.yaml`` with a source for every rule, validated at
  load by ``envs.rules_model``): the driver floor and ceiling of a CUDA release (``envs.rules.min_driver_for_cuda``,
  ``envs.rules.max_cuda_for_driver``) and the verdict on a pair (``envs.rules.check_driver``: WARN only through
  CUDA >= 11 minor-version compatibility), Horovod's features and build variables by version
  (``envs.rules.horovod_has``, ``envs.rules.horovod_build_variable``), TensorFlow's tested builds
  (``envs.rules.tf_tested``), glibc of an OS (``envs.rules.glibc_for_os``), the known bad pairs of installed
  packages (``envs.rules.check_pairs``) and an installed TensorFlow's declared requirements
  (``envs.rules.check_requirements``). Versions compare with ``packaging.version``; every answer carries its source.
- **Conda files** (``envs.lock``): ``envs.lock.conda_files(stack)`` -> ``CondaFiles`` under ``envs/conda/<stack>/``
  (``environment.yml``, ``virtual-packages.yml``, ``conda-lock.yml``: unified, installed with ``conda-lock install``,
  never an explicit lock); ``envs.installed.check_installed`` is the post-install check (every installed package
  pinned, else judged by the rules, else listed NOT CHECKED; read with ``envs.installed.parse_installed_json``);
  ``envs.lockcontent.gpu_lock_problems`` the GPU lock assertion.
- ``envs.check`` gives the consistency findings over Table 1, the manifests, the rules and the conda inputs
  (``invoke stacks --check``); ``envs.table1`` is the seed's
  Table 1 (``envs/table1.yaml``).
"""
