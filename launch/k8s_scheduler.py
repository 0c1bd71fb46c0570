"""The Kubernetes scheduler (``launch.scheduler.Scheduler``): a Kubeflow MPIJob (``launch.k8s``) of the stack's image,
handed to ``kubectl create``; never followed from here (``--detach`` does not apply), and a sweep is one MPIJob per
count and repeat, each waited for in turn, its results on a ReadWriteMany PersistentVolumeClaim (``--results
CLAIM``, mounted at ``RESULTS``). Render-only here: this machine has no Kubernetes API server.
"""
from __future__ import annotations

from chexstack.errors import ChexstackError
from launch.scheduler import Scheduler

#: Where a sweep's claim is mounted in the pods.
RESULTS = "/results"


class MpiJob(Scheduler):
    """Kubeflow's MPIJob: one Launcher pod runs mpirun over Worker pods of the stack's image."""

    launcher = "k8s"
    artifact = "MPIJob"
    tool = "kubectl"
    launch_model = "mpijob"

    def explain(self) -> str:
        return ("a Kubernetes MPIJob: its Launcher pod's mpirun starts the ranks in Worker pods of the stack's "
                "image, handed to kubectl")

    def render(self, spec, request, opts) -> str:
        from launch import k8s

        return k8s.render(spec, k8s.K8sOptions(rdma_resource=opts.rdma_resource))

    def mark_warning(self, text, warning) -> str:
        return "# warning: %s\n%s" % (warning, text)

    def submit(self, text, request, opts) -> str:
        from launch.submit import submit_k8s

        return submit_k8s(text)

    def sweep_results(self, results, tag):
        from launch.job import Mount

        return "%s/%s" % (RESULTS, tag), Mount("pvc:" + results, RESULTS)

    def check_results(self, results) -> None:
        if not results:
            raise ChexstackError("--launcher k8s: give --results CLAIM, a ReadWriteMany PersistentVolumeClaim where "
                                 "every count's rank 0 writes its throughput.json")

    def render_steps(self, allocation, steps, opts, *, header="", prologue="", log=None, nodelist=(),
                     mpirun_version_output=None, render_host=None) -> str:
        from launch import k8s

        return "---\n".join(k8s.render(step, k8s.K8sOptions(rdma_resource=opts.rdma_resource,
                                                             nodes=tuple(nodelist[:step.nodes])))
                            for step in steps)

    def submit_steps(self, text, opts, results, collect) -> None:  # one MPIJob per step: no one job id
        from chexstack.console import console
        from launch.submit import submit_k8s, wait_k8s

        for document in text.split("---\n"):
            name = submit_k8s(document)
            console.print("created [bold]%s[/]; waiting for it to succeed (counts run one after another)" % name)
            wait_k8s(name, opts.wait_s)


MPIJOB = MpiJob()
