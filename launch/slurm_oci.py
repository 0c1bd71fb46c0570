"""``OCI``: Slurm's own OCI containers (``srun --container=BUNDLE``, https://slurm.schedmd.com/containers.html),
picked by ``invoke train --launcher slurm --stack S --container BUNDLE`` (srun's own option name; the bundle is
``images.oci.make_bundle``'s, from the stack's verified image, on storage every node sees).

The batch script (``render``, ``templates/slurm-oci.sbatch``):

- checks that the bundle still records the image digest it was rendered for (``templates/oci-bundle-guard.sh``);
- makes this job's bundle beside the outputs (``templates/oci-job-bundle.sh``): the image bundle's ``config.json``
  with the run's mounts (data read-only, output) and working folder (``job_config``), its ``rootfs`` a link to
  the image bundle's, removed when the job ends. slurmstepd keeps a bundle's mounts and working folder, replaces
  its command and appends the step's environment (src/slurmd/slurmstepd/container.c, ``_modify_config``);
- runs ``srun --ntasks-per-node=1 --container=<job bundle>``: Slurm 22.05 runs one task per node in a container
  step (``_modify_config`` refuses more: "unexpected number of tasks 2 > 1"), so each node's task is
  ``python -m trainer.slurm_gloo --ranks-per-node K``, which starts that node's K ranks and wires them with
  Horovod's Gloo controller from Slurm's step environment (the node index from ``SLURM_STEP_NODELIST``, the
  rendezvous at srun's address). Slurm's PMIx/PMI2 plugins serve Slurm tasks, so they cannot wire ranks Slurm
  did not start. The task's command is ``/usr/bin/env`` with the image's own environment (``image_env``) first,
  since slurmstepd appends the submitting shell's (``PATH`` included) after the image's;
- exports the bundle's record for every rank's run record (``trainer.preflight.OCI_ENV``: ``run.container`` names
  the bundle, the image, its digest and image ID, and how the ranks found each other).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path
from string import Template

from chexstack.errors import ChexstackError
from launch.job import JobSpec
from launch.scheduler import Scheduler
from launch.slurm_schedulers import SlurmBatch, slurm_options

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The image's PATH when its config has none (the OCI image spec's usual default).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def bundle_of(image: str):
    """``images.oci.read_bundle`` of ``image`` (the ``--container`` path) with its ``config.json``: (record,
    config). ChexstackError for a relative path, and as ``read_bundle``."""
    from images.oci import read_bundle

    if not image.startswith("/"):
        raise ChexstackError("--container %s: expected the absolute path of an OCI bundle on storage every node "
                             "sees (srun --container takes it as is on each node)" % image)
    record = read_bundle(image)
    with open(os.path.join(image, "config.json")) as f:
        try:
            config = json.load(f)
        except ValueError as e:
            raise ChexstackError("%s/config.json: expected the bundle's OCI runtime config, JSON (%s)"
                                 % (image, e)) from None
    return record, config


#: The node's files a container on the node's network needs (read-only): its host names. Horovod's Gloo resolves
#: the node's host name, which the image's own /etc/hosts does not know ("Unable to find address for: <host>",
#: gloo/transport/tcp/device.cc, observed with Horovod 0.28.1 in a crun container); Docker manages /etc/hosts for
#: the same reason.
NODE_FILES = ("/etc/hosts",)


def job_config(config: dict, spec: JobSpec) -> dict:
    """The image bundle's ``config`` for ``spec``'s job: working folder ``spec.workdir``, the node's ``NODE_FILES``
    and a bind mount per ``spec.mounts`` (read-only ones ``ro``), after the image's own mounts. ChexstackError for a
    mount whose path is not absolute."""
    out = json.loads(json.dumps(config))
    process = out.setdefault("process", {})
    process["cwd"] = spec.workdir
    process["args"] = ["/bin/false"]  # slurmstepd puts the step's command here
    mounts = out.setdefault("mounts", [])
    for path in NODE_FILES:
        mounts.append({"destination": path, "type": "bind", "source": path, "options": ["bind", "ro"]})
    for m in spec.mounts:
        if not (m.source.startswith("/") and m.container_path.startswith("/")):
            raise ChexstackError("mount %s: expected absolute paths (a Slurm container binds them as is)" % m.source)
        mounts.append({"destination": m.container_path, "type": "bind", "source": m.source,
                       "options": ["rbind", "ro" if m.read_only else "rw"]})
    return out


def image_env(config: dict) -> list[str]:
    """The image's environment (``process.env``: ``NAME=value`` entries), ``PATH`` first (``DEFAULT_PATH`` when
    missing)."""
    env = [e for e in config.get("process", {}).get("env", []) if "=" in e]
    paths = [e for e in env if e.startswith("PATH=")] or ["PATH=" + DEFAULT_PATH]
    return paths[:1] + [e for e in env if not e.startswith("PATH=")]


def oci_env(record) -> dict[str, str]:
    """The ranks' record of the bundle (``trainer.preflight.OCI_ENV``'s variables)."""
    from trainer.preflight import OCI_ENV

    values = {"bundle": record.bundle, "image": record.image, "digest": record.digest, "image_id": record.image_id}
    return {name: values[key] for key, name in OCI_ENV if key in values}


def srun_lines(spec: JobSpec, config: dict) -> str:
    """``srun … --container="$job_bundle" /usr/bin/env IMAGE_ENV python -m trainer.slurm_gloo …`` for ``spec``,
    one segment per line: the step's nodes, one task on each with a CPU per rank (``--cpus-per-task``) and, for
    GPU ranks, the node's GPUs."""
    srun = ["srun", "--nodes=%d" % spec.nodes, "--ntasks=%d" % spec.nodes, "--ntasks-per-node=1",
            "--cpus-per-task=%d" % spec.ranks_per_node]
    if spec.gpus:
        srun.append("--gpus-per-node=%d" % spec.ranks_per_node)
    node = ["python", "-m", "trainer.slurm_gloo", "--ranks-per-node", str(spec.ranks_per_node)]
    return " \\\n    ".join([shlex.join(srun) + ' --container="$job_bundle"',
                             shlex.join(["/usr/bin/env"] + image_env(config)),
                             shlex.join(node + list(spec.trainer_args))])


def bundle_guard(spec: JobSpec, record) -> str:
    """Shell lines that stop the job when the bundle's record no longer names ``record.digest``."""
    from images.oci import RECORD

    return Template((TEMPLATES / "oci-bundle-guard.sh").read_text()).substitute(
        digest_line=shlex.quote('"digest": "%s"' % record.digest), record=shlex.quote(os.path.join(spec.image,
                                                                                                    RECORD)),
        bundle=shlex.quote(spec.image), digest=shlex.quote(record.digest), image=shlex.quote(record.image),
        stack=shlex.quote(spec.stack.name)).rstrip()


def job_bundle_lines(spec: JobSpec, config: dict, folder: str) -> str:
    """Shell lines that make the job's bundle in ``folder`` (a writable mount's source): ``job_config``'s JSON."""
    return Template((TEMPLATES / "oci-job-bundle.sh").read_text()).substitute(
        folder=shlex.quote(folder.rstrip("/")), rootfs=shlex.quote(os.path.join(spec.image, "rootfs")),
        config=json.dumps(job_config(config, spec), indent=2)).rstrip()


def _writable(spec: JobSpec) -> str:
    out = [m.source for m in spec.mounts if not m.read_only]
    if not out:
        raise ChexstackError("a Slurm OCI job needs a writable mount (the output folder) for its bundle")
    return out[-1]


def render(spec: JobSpec, opts) -> str:
    """The Slurm OCI batch script of ``spec`` (``spec.image``: the bundle) with ``opts`` (``launch.slurm.
    SlurmOptions``). ChexstackError: no stack, a bundle that is missing or not ``images.oci``'s."""
    from launch import slurm

    if spec.stack is None:
        raise ChexstackError("a Slurm OCI job runs a stack's image: give --stack")
    record, config = bundle_of(spec.image)
    with_env = dataclasses.replace(spec, env={**spec.env, **oci_env(record)})
    return Template((TEMPLATES / "slurm-oci.sbatch").read_text()).substitute(
        stack=spec.stack.name, title=" ".join(spec.stack.title.split()), bundle=spec.image, image=record.image,
        digest=record.digest, per_node=spec.ranks_per_node, directives=slurm.directives(spec, opts),
        exports=slurm.exports(with_env), bundle_guard=bundle_guard(spec, record),
        output_dirs=slurm.output_dirs(spec.mounts), job_bundle=job_bundle_lines(spec, config, _writable(spec)),
        srun=srun_lines(spec, config))


class SlurmOci(SlurmBatch):
    """Slurm's own OCI containers: ``srun --container`` of an OCI bundle (``--container BUNDLE``), one task per node
    starting the node's ranks, wired by Horovod's Gloo from Slurm's task environment (module docstring)."""

    model = "oci"
    launch_model = "oci"
    started_by = "srun --container, one task per node starting its ranks"
    controller = "gloo"
    image_hint = ""

    def explain(self) -> str:
        return ("a Slurm batch script (OCI containers): srun --container runs the stack's OCI bundle, one task per "
                "node starting its ranks (Horovod Gloo from Slurm's environment), handed to sbatch")

    def image(self, opts):
        stack, image, workdir = Scheduler.image(self, opts)
        if not opts.image:
            raise ChexstackError("--container runs an OCI bundle: give --container /shared/path/%s-bundle (invoke "
                                 "build --stack %s --bundle DIR makes one)" % (stack.name, stack.name))
        return stack, image, workdir

    def render(self, spec, request, opts) -> str:
        return render(spec, slurm_options(request, opts))

    def render_steps(self, allocation, steps, opts, *, header="", prologue="", log=None, nodelist=(),
                     mpirun_version_output=None, render_host=None) -> str:
        from launch import slurm

        options = slurm.SlurmOptions(time=opts.time, partition=opts.partition, account=opts.account,
                                     output=log or "%s-%%j.out" % allocation.name, nodelist=tuple(nodelist))
        record, config = bundle_of(allocation.image)
        with_env = dataclasses.replace(allocation, env={**allocation.env, **oci_env(record)})
        body = "\n".join("# %d %s on %d node(s)\n%s" % (s.world_size, "GPU(s)" if s.gpus else "CPU rank(s)",
                                                        s.nodes, srun_lines(s, config))
                         for s in steps)
        return Template((TEMPLATES / "slurm-steps.sbatch").read_text()).substitute(
            header=header.rstrip("\n"), directives=slurm.directives(allocation, options),
            exports=slurm.exports(with_env), mpi_guard=bundle_guard(allocation, record),
            output_dirs=slurm.output_dirs(allocation.mounts),
            prologue="\n".join(p for p in (prologue.rstrip("\n"),
                                           job_bundle_lines(allocation, config, _writable(allocation))) if p),
            steps=body)


OCI = SlurmOci()
