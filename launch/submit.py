"""Hand a rendered artifact to its scheduler and return the job's id: ``sbatch`` for Slurm batch scripts,
``kubectl create`` for MPIJobs. Neither tool is needed to render; a missing one is a clear error at submit time.
"""
from __future__ import annotations

from chexstack.tools import run_checked


def _run(tool: str, args: list[str], stdin: str, what: str, timeout_s: int = 300, doing: str = "submitting") -> str:
    return run_checked([tool] + args, "%s the %s" % (doing, what), timeout=timeout_s, input=stdin,
                       missing="%s not found on PATH: cannot submit the %s here; render it with --render and submit "
                               "it where %s is installed" % (tool, what, tool)).stdout.strip()


def submit_slurm(script: str) -> str:
    """``sbatch --parsable`` with the script on stdin -> the job id (``12345``; ``--parsable`` prints
    ``id[;cluster]``, https://slurm.schedmd.com/sbatch.html)."""
    out = _run("sbatch", ["--parsable"], script, "Slurm batch script")
    return out.splitlines()[-1].split(";")[0] if out else out


def submit_k8s(manifest: str) -> str:
    """``kubectl create -f - -o name`` -> ``mpijob.kubeflow.org/<name>``."""
    return _run("kubectl", ["create", "-f", "-", "-o", "name"], manifest, "MPIJob")


def wait_k8s(name: str, timeout_s: int) -> None:
    """Block until MPIJob ``name`` (``mpijob.kubeflow.org/<name>``) has the condition Succeeded (mpi-operator
    v2beta1 JobStatus conditions). Raises ChexstackError when it does not within ``timeout_s`` seconds."""
    _run("kubectl", ["wait", "--for=condition=Succeeded", "--timeout=%ds" % timeout_s, name], "", "MPIJob",
         timeout_s=timeout_s + 60, doing="waiting for")
