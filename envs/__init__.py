"""What a stack is: manifests (``envs/stacks/*.yaml``), the seed's Table 1, compatibility rules, conda files and
locks. Load a stack with ``envs.manifest.load_stack(name)``.
"""
