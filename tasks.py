"""chexstack's command line: thin invoke glue over envs/, images/, validate/, trainer/, launch/ and bench/.

Each task parses its options and calls one function of an area module; the invoke machinery (number options
checked while parsing, a ``ChexstackError`` as one ``error:`` line on stderr and its exit code) is
``chexstack.cli``. Run ``invoke --list`` for the tasks, ``invoke --help TASK`` for options; ``main`` is the
``chexstack`` command (the same tasks from any folder).
"""
from __future__ import annotations

import inspect
import sys

from invoke import Exit

from chexstack.cli import (
    NAME,
    csv_list,
    end_quietly_on_a_closed_pipe,
    parse_errors_exit_with_usage,
    program,
    task,
    user_errors,
)
from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode
from launch.options import SWEEP_NAMES, SWEEP_OPTIONS, sweep_help, trainer_help, trainer_options, with_trainer_options

end_quietly_on_a_closed_pipe()  # invoke and chexstack both load this module before they print (help included)
parse_errors_exit_with_usage()  # ... and before they parse the tasks' options

# --- envs: stacks (Table 1, manifests, consistency) and conda locks ------------------------------------------------

@task(help={"check": "list every inconsistency with its source; exit 1 only for blocking ones (this repository's "
                     "files), never for Table 1's own facts",
            "json": "print JSON for machines instead of tables"})
@user_errors
def stacks(c, check=False, json=False):
    """Print Table 1 exactly as published, beside it what each stack ships, and every stack's versions."""
    from envs.check import all_findings, stack_order
    from envs.show import findings_renderable, stacks_json, stacks_renderable, table1_renderable

    findings = all_findings() if check else None
    if json:
        sys.stdout.write(stacks_json(stack_order(), findings))
    else:
        console.print(table1_renderable())
        console.print(stacks_renderable(stack_order()))
        if findings is not None:
            console.print(findings_renderable(findings))
    if findings and any(f.blocking for f in findings):
        raise Exit(code=ExitCode.FAILED)


@task(iterable=["platform"],
      help={"stack": "stack with envs/conda/<stack>/environment.yml (conda, cpu)",
            "platform": "platform to lock (repeatable; default: the environment file's platforms)",
            "check": "compare the lock's content hash with the current inputs; exit 1 naming what changed",
            "kind": "lock (unified, default) or explicit (refused when the environment has pip requirements)",
            "conda": "conda/mamba/micromamba executable for the solver (default: $CONDA_EXE, then PATH)",
            "installed": "post-install check of the whole environment: `conda list --json`, "
                         "`pip list --format=json` or `pip freeze` output"})
@user_errors
def lock(c, stack=None, platform=None, check=False, kind="lock", conda=None, installed=None):
    """Lock a stack's conda environment for its cluster, check drift, or check an installed environment.

    The lock is solved for the target's virtual packages (virtual-packages.yml: __cuda, __glibc), not this machine's;
    --check compares content hashes; --installed checks `conda list --json` / `pip list --format=json` / `pip freeze`
    output: every package against the lock or pins and the known-bad pairs of envs/rules.yaml."""
    from envs.lockflow import lock_stack

    raise Exit(code=lock_stack(stack, platforms=platform or None, check=check, kind=kind, conda_exe=conda,
                               installed=installed))


# --- images: render, build, convert (images/) -------------------------------------------------------------------


@task(help={"stack": "stack name (envs/stacks/<name>.yaml)", "format": "docker | singularity",
            "base": "base image reference instead of the manifest's (a local stand-in)"})
@user_errors
def render(c, stack=None, format="docker", base=None):
    """Print the stack's Dockerfile or Singularity definition (rendered by hpccm from the manifest)."""
    from envs.manifest import load_stack
    from images.render import render as render_recipe

    sys.stdout.write(render_recipe(load_stack(stack), format, base))


@task(help={"stack": "stack name", "runtime": "docker | singularity | all (a SIF from the verified Docker image)",
            "tag": "REPOSITORY:TAG instead of chexstack/<stack>:<version>",
            "base": "base image reference instead of the manifest's (e.g. a local stand-in)",
            "no-cache": "rebuild every layer", "dry-run": "print the Dockerfile, context and labels; build nothing",
            "allow-mismatch": "tag even when verification finds mismatches (listed in an image label)",
            "sign-key": "PEM private key that signs the SIF (public key beside it as *.pub.pem; default "
                        "$CHEXSTACK_SIF_KEY, else build/keys/sif-signing.pem, made on first use)",
            "push": "HOST[:PORT]/REPO[:TAG]: push the verified image there (never an unverified one; the registry "
                    "is checked before the build) and print and record its digest (build/records/)",
            "bundle": "also unpack the verified image into this new folder as an OCI runtime bundle (skopeo, umoci) "
                      "for Slurm's srun --container (invoke train --launcher slurm --container DIR)"})
@user_errors
def build(c, stack=None, runtime="docker", tag=None, base=None, no_cache=False, dry_run=False, allow_mismatch=False,
          sign_key=None, push=None, bundle=None):
    """Build the stack's image (docker SDK), verify it inside, tag it only when it matches its manifest; with
    --runtime singularity|all also its signed SIF, verified inside the same way."""
    from images.build import build as build_image

    build_image(stack, runtime=runtime, tag=tag, base=base, no_cache=no_cache, dry_run=dry_run,
                allow_mismatch=allow_mismatch, sign_key=sign_key, push=push, bundle=bundle)


@task(help={"dockerfile": "path of the Dockerfile",
            "build-arg": "NAME=VALUE for an ARG, or NAME for its value in the environment (repeatable), as docker "
                         "build --build-arg",
            "output": "write the definition here instead of stdout (never over the Dockerfile, its ignore file or a "
                      "COPY/ADD source)",
            "pull": "where a base image's config is read: missing (default: the local engine, else the image's "
                    "registry, as docker build pulls) or never (the local engine only, as podman build --pull=never)"},
      iterable=["build_arg"])
@user_errors
def convert(c, dockerfile, build_arg=None, output=None, pull="missing"):
    """Convert a Dockerfile to a Singularity definition that builds and runs the same, or refuse naming the line
    (exit 2)."""
    from chexstack.outputs import output_file
    from convert.base import pull_reader
    from convert.dockerfile import convert_file, parse_build_args

    target = output_file(output, "--output") if output else None
    text = convert_file(dockerfile, parse_build_args(build_arg), target, pull_reader(pull))
    if not target:
        sys.stdout.write(text)


# --- train (launch/, trainer/) ---------------------------------------------------------------------------------
#: The options of where ``invoke train`` runs that apply to some launchers only (``launch.where`` checks them).
WHERE_OPTIONS = ("runtime", "network", "image", "per_node", "hybrid", "container", "rdma", "render", "submit",
                 "as_root", "nodes", "ntasks_per_node", "time", "partition", "account", "detach", "requeue")


@task(
    help={
        **trainer_help(),  # every trainer option's own help; the ones below say more (launchers, not the trainer)
        "gpus": "GPUs to use, one rank each (0: CPU ranks)",
        "np": "number of ranks (0, the default: one per GPU, or 1 with --gpus 0)",
        "output": trainer_help()["output"] + "; slurm/k8s: required, an absolute path the cluster's nodes see",
        "controller": "Horovod controller: gloo or mpi (default: chosen for this host's network interfaces)",
        "stack": "run inside this stack's built image (invoke build --stack S) instead of on this machine; with "
                 "--launcher slurm/k8s: the stack whose image the cluster runs",
        "runtime": "with --stack: docker (default) or singularity (the SIF of invoke build --runtime singularity)",
        "image": "with --stack: this image reference, .sqsh or SIF path instead of the stack's verified tag",
        "network": "with --stack and docker: host (default) or none (loopback only: the MPI controller is used)",
        "as-root": "with --stack: run as root in the container (default: as you, so --output stays yours; "
                   "singularity: --fakeroot)",
        "launcher": "local (default), slurm (batch script) or k8s (MPIJob); slurm/k8s need --render or --submit",
        "per-node": "slurm/k8s: GPUs (or CPU ranks) per node",
        "hybrid": "slurm: the hybrid model (host mpirun + singularity exec of the SIF) instead of srun --mpi=pmix "
                  "with pyxis --container-image",
        "container": "slurm: Slurm's own OCI containers (srun --container) running this OCI bundle, an absolute path "
                     "every node sees (invoke build --stack S --bundle DIR makes it); ranks wired by Horovod Gloo "
                     "from Slurm's task environment",
        "rdma": "k8s: RDMA device plugin resource each worker requests, e.g. rdma/hca_shared_devices_a (+ IPC_LOCK)",
        "render": "slurm/k8s: print the batch script / MPIJob",
        "submit": "slurm/k8s: submit it with sbatch / kubectl and print the job id; slurm waits for the job, showing "
                  "its progress (--detach: returns at once)",
        "nodes": "slurm/k8s: number of nodes (with --ntasks-per-node: the world size is their product)",
        "ntasks-per-node": "slurm/k8s: ranks per node (default --per-node)",
        "time": "slurm: time limit, e.g. 01:00:00",
        "partition": "slurm: partition",
        "account": "slurm: account",
        "detach": "slurm --submit: print the job id and return instead of waiting for the job",
        "requeue": "slurm, bare metal: #SBATCH --requeue; a job Slurm restarts (scontrol requeue, a node failure) "
                   "continues from the last committed checkpoint",
        "hosts": "local: run the ranks on these hosts over ssh, host:slots,... (horovodrun -H; run it on one of "
                 "them, with the environment and data on shared storage)",
        "ssh-key": "with --hosts: the ssh private key for the hosts (horovodrun --ssh-identity-file)",
        "validate": "judge this node first (invoke validate with the run's --stack and --gpus, its evidence kept in "
                    "OUTPUT/validate-<UTC time>/): a FAIL or ERROR stops the run (exit 1); the verdict and the "
                    "bundle's SHA-256 go into the run's signed statement",
        "evidence": "bundles of invoke validate --collect DIR from the run's nodes, comma-separated: each host's "
                    "verdict (its report.json) and the bundle's SHA-256 go into the signed statement; a FAIL or "
                    "ERROR stops the run (exit 1)",
        "explain": "explain a failed run from its saved log (a run's launch.log, horovodrun/mpirun output, a Slurm "
                   "job's slurm-N.out, an MPIJob launcher's log): the line that says why, its cause and remedy, or "
                   "that a signal stopped the run or the log shows no failure; runs nothing. Exit status 1 when "
                   "the log shows a failure (explained or unclassified, a hang), 0 only for a finished run, no "
                   "failure found or a run a signal stopped that had not hung, 2 for a log it cannot read",
    },
)
@user_errors
@with_trainer_options
def train(c, gpus=0, np=0, data=None, images=None, labels=None, model=None, epochs=None, batch_size=None,
          image_size=None, output=None, val_fraction=None, test_fraction=None, resume=False, controller=None,
          stack=None, runtime="docker", image=None, network="host", launcher="local", per_node=4, hybrid=False,
          container=None, rdma=None, render=False, submit=False, as_root=False, nodes=0, ntasks_per_node=0,
          time="01:00:00", partition=None, account=None, detach=False, hosts=None, ssh_key=None, requeue=False,
          validate=False, evidence=None, explain=None, **trainer):
    """Train CheXNet with Horovod on this machine; prints the launch command, progress and a table of AUROCs.
    Every ``python -m trainer`` option (--lr, --seed, --weights, ...) is an option here too, with the trainer's
    help, number type and default (not given here: the trainer's own applies); the ones in this signature come
    first in the trainer's command line. --explain LOG: why a run failed, from its log, with the message a failed
    run prints."""
    import launch
    from launch.options import given, slurm_model, trainer_argv
    from launch.request import TrainRequest

    if explain is not None:
        from launch.failure import explain_saved_log

        names = [n for n in inspect.signature(train.body).parameters if n not in ("c", "explain")]
        others = given(train.body, {**locals(), **trainer}, names)
        if others:
            raise ChexstackError("--explain LOG reads a log and runs nothing: leave out %s"
                                 % ", ".join("--" + n.replace("_", "-") for n in others))
        explained = explain_saved_log(explain)
        console.print(explained.text, markup=False, highlight=False, soft_wrap=True)
        if explained.failed:
            raise Exit(code=ExitCode.FAILED)
        return

    where_given = given(train.body, locals(), WHERE_OPTIONS)
    scheduler_model, image = slurm_model(hybrid, container, image)
    where = launch.where(launcher, where_given, stack=stack, runtime=runtime,
                         image=image, network=network, as_root=as_root, hosts=csv_list(hosts), ssh_key=ssh_key,
                         per_node=per_node, slurm_model=scheduler_model, rdma_resource=rdma,
                         render=render, submit=submit, nodes=nodes or None, ntasks_per_node=ntasks_per_node or None,
                         time=time, partition=partition, account=account, detach=detach, requeue=requeue)
    # the trainer's options, the ones stated above and the others (**trainer), as its command line
    argv = trainer_argv(train.body, {**locals(), **trainer})
    request = TrainRequest(gpus=gpus, np=np or None, controller=controller, argv=argv)
    validation = []
    if validate or evidence is not None:
        from validate.verdict import judged

        if evidence is not None and not csv_list(evidence):
            raise ChexstackError("--evidence %r: expected bundle folders of invoke validate --collect DIR, "
                                 "comma-separated" % evidence)
        if validate and (where.cluster is not None or where.hosts):
            raise ChexstackError("--validate judges this machine, not the run's nodes: collect a bundle on each "
                                 "(invoke validate --collect DIR) and give them with --evidence DIR,...")
        validation = judged(csv_list(evidence) if evidence is not None else [], validate,
                            request.with_absolute_paths().options.output, stack, gpus)
    launch.run(request, where, validation=validation)


@task(help={
    "model": "saved model to score (model.h5 or model-best.h5 of a training run)",
    "images": "folder with the PNGs (searched recursively)",
    "labels": "label file Data_Entry_2017*.csv or .csv.gz",
    "list": "score only the image names in this file (e.g. NIH's test_list.txt); with --split, a run's splits.csv",
    "split": "score only this split (train, val or test) of the run that trained --model: its splits.csv beside the "
             "model (or --list RUN/splits.csv); test: the run's held-out images",
    "output": "folder for evaluation.json and predictions.csv (default: python -m trainer evaluate's, "
              "runs/evaluate); not a training run's folder, whose predictions.csv it would replace "
              "(RUN/evaluation is fine)",
    "np": "CPU ranks under horovodrun (default 1: one process)",
})
@user_errors
def evaluate(c, model=None, images=None, labels=None, list=None, split=None, output=None, np=1):
    """Score a saved model on a labelled set: per-pathology AUROC with 95 % patient-bootstrap intervals."""
    from launch.evaluate import evaluate as run_evaluate
    from launch.evaluate import evaluate_args

    run_evaluate(evaluate_args(model, images, labels, list, output, split), np)


@task(help={
    "data": "dataset folder: Data_Entry_2017*.csv[.gz] in it, PNGs anywhere below it (as invoke train --data)",
    "images": "folder with the PNGs (searched recursively); with --labels",
    "labels": "label file Data_Entry_2017*.csv or .csv.gz; with --images",
    "image-size": "side in pixels of the stored images; train from the copy with the same --image-size (default: "
                  "the trainer's, %s)" % trainer_options(only=("image_size",))[0].default,
    "output": "the prepared copy's folder: new or empty, or one a stopped prepare left (it resumes)",
    "shard-images": "images per shard (0, the default: 128 MiB of pixels per shard)",
}, ints=["image_size"])
@user_errors
def prepare(c, data=None, images=None, labels=None, image_size=None, output=None, shard_images=0):
    """Decode, resize and shard a ChestX-ray14 folder once (all cores), for invoke train --data PREP; resumable."""
    from launch.prepare import prepare as run_prepare
    from launch.prepare import prepare_argv

    if not output:
        raise ChexstackError("invoke prepare needs --output PREP (e.g. invoke prepare --data /data/chestxray14 "
                             "--image-size 256 --output /data/chestxray14-256)")
    if shard_images < 0:
        raise ChexstackError("--shard-images %d: expected a positive number of images a shard, or 0 (the default: "
                             "the trainer's own size)" % shard_images)
    run_prepare(prepare_argv(data, images, labels, image_size, output, shard_images or None))


# --- validate (node fitness checks) -------------------------------------------------------------------------------
@task(help={"stack": "stack to validate against (envs/stacks/<name>.yaml): its CUDA floor, image and Horovod build",
            "hosts": "comma-separated hosts of a multi-node run (mpirun, NCCL and ib_write_bw across them)",
            "json": "also write the report as JSON to this file (with --job too: the job file's rules)",
            "only": "comma-separated check ids or areas to run (e.g. gpu,ib.ports)",
            "skip": "comma-separated check ids or areas to leave out",
            "collect": "also write a bundle to this new folder: every tool output, file and fact the checks read, "
                       "and the report",
            "from": "judge a bundle written by --collect (on any machine) instead of this node",
            "fast": "only the checks that fit a Slurm prolog: seconds, nothing launched (no mpirun, docker run, "
                    "apptainer exec, all_reduce_perf)",
            "job": "judge your own MPIJob manifest (YAML) or Slurm batch script by the rules chexstack's renders "
                   "obey: each finding with its file and line; reads no node",
            "gpus": "GPUs the run will use (gpu.inventory fails on a node with fewer; input.capacity judges the cores "
                    "against that many, on a node without GPUs against each published GPU kind, a SKIP; 0: all "
                    "the node has)",
            "images": "a folder of your own PNGs (searched recursively): input.capacity times the decode of up to 8 "
                      "of them (default: the shipped 1024² sample)"})
@user_errors
def validate(c, stack=None, hosts=None, json=None, only=None, skip=None, collect=None, from_=None, fast=False,
             job=None, gpus=0, images=None):
    """Is this node fit to run the stack at full speed? A table of checks; exit 0 no FAIL, 1 FAIL, 2 cannot run.
    --job FILE judges a job file instead."""
    from validate.report import validate as run_validate

    if job is not None:
        from launch.options import given
        from validate.jobfile import validate_job

        others = given(validate.body, locals(), ("stack", "hosts", "only", "skip", "collect", "from_", "fast", "gpus",
                                                     "images"))
        if others:
            raise ChexstackError("--job FILE judges a job file, not a node: leave out %s"
                                 % ", ".join("--" + n.rstrip("_").replace("_", "-") for n in others))
        code = validate_job(job, json)
        if code:
            raise Exit(code=code)
        return

    code = run_validate(stack, csv_list(hosts), json, csv_list(only), csv_list(skip), collect, from_, fast, gpus,
                        images)
    if code:
        raise Exit(code=code)


# --- bench: scaling sweep, Figure 1, launchers ---------------------------------------------------------------------
#: The options of a throughput sweep that invoke bench and invoke study share (``bench.sweep.SweepRequest``): the
#: counts, and the trainer's own options of a sweep (``launch.options.SWEEP_OPTIONS``, with the trainer's help).
SWEEP_HELP = {
    "gpus": "GPU counts to sweep, one rank per GPU as in invoke train --gpus (default 1,2,3,4,8, the seed's "
            "Figure 1)",
    "np": "CPU rank counts to sweep instead, e.g. 1,2 (as invoke train --gpus 0 --np N)",
    **sweep_help(),
}


@task(help={
    **SWEEP_HELP,
    "stack": "run the trainer in this stack's image (local: docker, as invoke train --stack; required for slurm/k8s)",
    "launcher": "local (horovodrun here), mpirun (horovodrun's MPI across --hosts), slurm, k8s",
    "hosts": "for mpirun: host:slots,... (Horovod's -H)",
    "label": "name of this system in the figure and the result file (default STACK-LAUNCHER)",
    "output": "folder of the sweep JSON (default bench/results)",
    "per_node": "slurm/k8s: GPUs (or CPU ranks) per node",
    "image": "with --stack: image reference (local: Docker; slurm: registry ref or .sqsh, hybrid: .sif; k8s: "
             "registry ref) instead of the stack's verified tag",
    "hybrid": "slurm: hybrid model (host mpirun + singularity exec) instead of srun --mpi=pmix with pyxis",
    "results": "slurm: results folder, an absolute path every node sees; k8s: ReadWriteMany PVC claim name",
    "rdma": "k8s: RDMA device plugin resource each worker requests, e.g. rdma/hca_shared_devices_a (+ IPC_LOCK)",
    "render": "slurm/k8s: print the batch script / MPIJobs",
    "submit": "slurm/k8s: submit them (sbatch / kubectl; k8s counts run one after another)",
    "collect": "FOLDER of a scheduled sweep: write its sweep JSON",
    "repeats": "runs of each count (slurm: job steps of the one job; k8s: one MPIJob each), round-robin over "
               "the counts per repeat (1,2,...,1,2,...) so "
               "drift hits every count alike; 3 or more give each point a 95 % interval (5 for a readable 3 %)",
})
@user_errors
@with_trainer_options(only=SWEEP_OPTIONS, names=SWEEP_NAMES)
def bench(c, gpus=None, np=None, stack=None, launcher="local", hosts=None, label=None, output="bench/results",
          per_node=4, image=None, hybrid=False, results=None, rdma=None, render=False, submit=False,
          collect=None, repeats=1, **trainer):
    """Scaling sweep: the trainer's throughput mode at each count -> one JSON (images/s, efficiency, run record).
    A GPU sweep run here also records input_capacity: can this node's cores decode PNGs as fast as the largest count
    trains (the line of invoke validate --only input.capacity; a warning when not)."""
    from pathlib import Path

    from bench import main
    from launch.options import given, trainer_argv

    if collect:
        return main.collect(collect, Path(output), label, given(bench.body, locals(), ("launcher",)).get("launcher"))
    where = main.place(launcher, given(bench.body, locals(), (
        "hosts", "image", "per_node", "hybrid", "rdma", "results", "render", "submit")), stack=stack, image=image,
        hosts=tuple(csv_list(hosts)), per_node=per_node, slurm_model="hybrid" if hybrid else None,
        rdma_resource=rdma, results=results, render=render, submit=submit)
    counts, on_gpus = main.sweep_counts(gpus, np)
    req = main.SweepRequest(counts=counts,
                            gpus=on_gpus, label=label or main.default_label(stack, launcher),
                            launcher=launcher, hosts=tuple(csv_list(hosts)), stack=stack, image=image,
                            repeats=repeats, argv=trainer_argv(bench.body, trainer))
    main.bench(req, Path(output), main.REPO / "runs" / "bench", where)


@task(help={
    **SWEEP_HELP,
    "systems": "the systems to compare, comma-separated, the first the baseline of the % differences: baremetal "
               "(Slurm, the trainer in --python's environment), apptainer (Slurm's hybrid model: the host's mpirun "
               "around apptainer exec of the stack's SIF), mpijob (the stack's MPIJob as pods of its Docker image); "
               "each SYSTEM[:PATH], the network path a factor of its own: host (the hosts' network; baremetal's "
               "and apptainer's only path, mpijob:host is hostNetwork), overlay (mpijob's default: the test "
               "cluster's VXLAN pod overlay, as flannel), bridge (each pod on the hosts' bridge); to check the study "
               "on the test cluster, mpijob+RATE (e.g. mpijob+400mbit: the mpijob with each pod's link limited to "
               "RATE both ways, tc tbf on the pod's veth, gone with the pod; needs root) and mpijob+none (the same "
               "path, nothing planted); slurm-oci (Slurm's srun --container of the stack's --bundle)",
    "stack": "the stack whose SIF (apptainer) and Docker image (mpijob) run; required with either",
    "hosts": "the nodes every system runs on, comma-separated (default: the nodes Slurm lists and has not lost, "
             "as many as the largest count needs)",
    "per_node": "ranks per node (GPUs, or CPU ranks); 1 puts each rank of a count on its own host",
    "repeats": "paired rounds: in each every system runs every count once, in an order drawn per round from "
               "--seed; a gap is the per-round ratios' median with its interval; 3 or more give intervals (with "
               "--resolve: the fewest rounds)",
    "seed": "draws each round's order of the systems (default: drawn, printed and recorded in the study's record)",
    "resolve": "add rounds until every gap's 95 % interval half-width is at most this many % (e.g. 3), or until "
               "--max-repeats or --budget runs out; the report says which stopped it",
    "max_repeats": "with --resolve: the most rounds (default 30)",
    "budget": "with --resolve: minutes the rounds may take; no round starts that would pass it",
    "results": "folder of the runs, an absolute path every node sees (default runs/study in this checkout)",
    "python": "the bare-metal system's Python, of an environment every node sees (default this one)",
    "sif": "the apptainer system's SIF (default the stack's verified one in build/sif); oras://REGISTRY/REPO:TAG pulls "
           "a SIF pushed with apptainer push and runs it only when apptainer verify passes with the project's key",
    "image": "the mpijob system's Docker image (default the stack's verified tag, run from this engine); a registry "
             "reference by digest (REGISTRY/REPO@sha256:...) is pulled by the test cluster's pods' engine, as a "
             "kubelet pulls it, and a pull that fails fails the job",
    "bundle": "the slurm-oci system's OCI bundle, on storage every node sees (invoke build --stack S --bundle DIR)",
    "label": "names the study's folders and jobs (default study)",
    "output": "folder where the study's folder goes: a sweep JSON per series and figure1.png/.csv/.md "
              "(default bench/results)",
    "title": "figure title",
    "bandwidth": "as bench-report --bandwidth: Gbit/s, or a validate --hosts JSON report (mpi.bandwidth)",
    "time": "each Slurm job's time limit (HH:MM:SS)",
    "render": "print the seed, the rounds' order and each system's jobs of the first round (batch scripts, "
              "MPIJobs); run nothing",
}, ints=["seed", "max_repeats"], floats=["resolve", "budget"])
@user_errors
@with_trainer_options(only=SWEEP_OPTIONS, names=SWEEP_NAMES)
def study(c, systems="baremetal,apptainer,mpijob", gpus=None, np=None, stack=None, hosts=None, per_node=1,
          repeats=5, results=None, python=None, sif=None, image=None, label="study", output="bench/results",
          title=None, bandwidth=None, time="01:00:00", render=False, seed=None, resolve=None,
          max_repeats=None, budget=None, bundle=None, **trainer):
    """The seed study on one set of hosts: the same sweep as bare metal, HPC container and Kubernetes pods,
    interleaved, then Figure 1 with intervals, the comparability caption and the gap (docs/benchmarks.md)."""
    from pathlib import Path

    from bench import main
    from bench import study as study_
    from launch.options import trainer_argv

    counts, on_gpus = main.sweep_counts(gpus, np)
    sweep = main.SweepRequest(counts=counts, gpus=on_gpus, label=label, launcher="slurm", stack=stack,
                              repeats=repeats, argv=trainer_argv(study.body, trainer))
    req = study_.StudyRequest(sweep=sweep, systems=tuple(csv_list(systems)),
                              hosts=tuple(csv_list(hosts)) or study_.slurm_hosts(), per_node=per_node,
                              results=results or str(main.REPO / "runs" / "study"),
                              python=python or sys.executable, sif=sif, image=image, time=time, seed=seed,
                              resolve=resolve, max_repeats=max_repeats, budget=budget, bundle=bundle)
    if render:
        print(study_.render(req), end="")
        return
    study_.run_study(req, Path(output), title, bandwidth)


@task(help={
    "results": "result JSON files, comma-separated or globs; the first is the baseline of the % differences "
               "(more after `--`)",
    "output": "PNG path; the .csv and .md tables are written beside it",
    "title": "figure title",
    "strict": "refuse (exit 2) when a series differs from the baseline in more than the system (stack versions, "
              "data, image size, batch, model, precision, hosts)",
    "baseline": "regression gate: judge RESULTS against this sweep JSON, exit 1 when a point falls below it "
                "(no figure is drawn)",
    "tolerance": "with --baseline: % below a baseline point without an interval (< 3 repeats) that fails "
                 "(default 5)",
    "bandwidth": "allreduce bus bandwidth to predict the gradients' allreduce from: Gbit/s, or the JSON report of "
                 "invoke validate --hosts A,B --json FILE (its mpi.bandwidth)",
    "verify": "refuse (exit 1) any result, --baseline included, whose signed statement is missing or fails "
              "(invoke verify-run's checks; drift is --strict's), naming the file and the check",
}, floats=["tolerance"])
@user_errors
def bench_report(c, results, output="bench/results/figure1.png", title=None, strict=False, baseline=None,
                 tolerance=None, bandwidth=None, verify=False):
    """The seed's Figure 1: median images/s vs count per system with 95 % intervals, % difference, scaling
    efficiency (PNG + CSV + Markdown); with --baseline the regression gate."""
    import shlex
    from pathlib import Path

    from bench import main

    items = [results] + shlex.split(c.remainder or "")
    if verify:
        main.refuse_unverified(items, (baseline,) if baseline else ())
    if baseline:
        return main.regression_gate(items, baseline, tolerance)
    main.report(items, Path(output), title, strict, bandwidth)


@task(help={"dir": "the result's folder: a run's --output, a sweep's or a study's folder (its chexstack.intoto.json)",
            "key": "PEM public key to verify with (default the project's, beside the SIF signing key: "
                   "build/keys/sif-signing.pub.pem or $CHEXSTACK_SIF_KEY's)",
            "allow-drift": "accept a statement whose run drifted (shown, not refused)"})
@user_errors
def verify_run(c, dir, key=None, allow_drift=False):
    """Check a result's signed statement offline: the signature, every result file's SHA-256, the SIF where it is at
    hand, drift; print what it was produced from. Exit 0 verified, 1 a mismatch (named), 2 cannot verify."""
    from launch.attest import verify

    verdict = verify(dir, key, allow_drift)
    for line in verdict.shown:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in verdict.drift:
        console.print("drift: %s" % line, markup=False, highlight=False, soft_wrap=True)
    if verdict.problems:
        raise ChexstackError("%s: not verified:\n  %s" % (dir, "\n  ".join(verdict.problems)),
                             exit_code=verdict.code)
    console.print("verified: %s" % dir, markup=False)


def main(argv: list[str] | None = None) -> None:
    """The ``chexstack`` command (pyproject ``[project.scripts]``, ``python -m chexstack``): this module's tasks from
    any folder, also on a node where only the package is installed (``tasks`` is installed as a module beside the
    packages, pyproject ``[tool.setuptools] py-modules``). ``chexstack validate`` = ``invoke validate`` in the
    checkout. Exits with the task's code; ``argv``: the full command line (default ``sys.argv``)."""
    from invoke import Collection

    program(Collection.from_module(sys.modules[__name__]), NAME).run(argv)
